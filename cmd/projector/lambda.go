package main

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/esm"
	"github.com/ssodir/ssodir/internal/lambdafn"
	"github.com/ssodir/ssodir/internal/streams"
)

// lambda runs the projector as a Lambda function (docs/aws.md, "Lambda mode"): the
// tenants' streams arrive through event source mappings, the re-drive of dead letters on
// a schedule. The handler is the long-running projector's.
func (a *app) lambda(ctx context.Context) error {
	if err := a.ensureTables(ctx); err != nil {
		return fmt.Errorf("prepare tables: %w", err)
	}
	dl := streams.NewDeadLetters(a.clients.DB, a.deadLetterTable(), consumer)
	// A user.erased record starts its erasure and goes; resume-erasures goes on with it.
	a.handler.DetachErasures()
	lambdafn.Start(&lambdafn.Function{
		Log: a.log,
		Stream: esm.New(esm.Config{Labels: a.names.ParseCommands, DeadLetters: dl, Handle: a.handler.HandleMessage,
			Log: a.log.Named("esm")}),
		Tasks: map[string]func(context.Context) error{
			"redrive-dead-letters": func(ctx context.Context) error {
				res, err := dl.Redrive(ctx, streams.DeadLetterFilter{}, a.handler.Apply)
				if err == nil && (res.Applied > 0 || len(res.Failed) > 0) {
					a.log.Info("dead letters re-driven", zap.Int("applied", res.Applied), zap.Int("still_failing", len(res.Failed)))
				}
				return err
			},
			// Every pending erasure, until the invocation's deadline less a margin
			// (docs/erasure.md, "The bound").
			"resume-erasures": func(ctx context.Context) error {
				res, err := a.eraser.ResumePending(ctx, 0)
				if res.Resumed > 0 || res.Left > 0 {
					a.log.Info("erasures resumed", zap.Int("pending", res.Pending), zap.Int("resumed", res.Resumed),
						zap.Int("finished", res.Finished), zap.Int("left_for_the_next_run", res.Left))
				}
				return err
			},
		},
	})
	return nil
}
