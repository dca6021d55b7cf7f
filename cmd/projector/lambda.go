package main

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/esm"
	"github.com/ssodir/ssodir/internal/lambdafn"
)

// lambda runs the projector as a Lambda function (docs/aws.md, "Lambda mode"): the
// tenants' streams arrive through event source mappings, the re-drive of dead letters on
// a schedule. The handler is the long-running projector's.
func (a *app) lambda(ctx context.Context) error {
	fn, err := a.lambdaFunction(ctx)
	if err != nil {
		return err
	}
	lambdafn.Start(fn)
	return nil
}

// lambdaFunction is what the function answers: every invocation goes to its Invoke (the
// tests invoke it in process, as the runtime does).
func (a *app) lambdaFunction(ctx context.Context) (*lambdafn.Function, error) {
	if err := a.ensureTables(ctx); err != nil {
		return nil, fmt.Errorf("prepare tables: %w", err)
	}
	dl := deadletters.New(a.clients.DB, a.deadLetterTable(), consumer)
	// Records the mappings give up on mark their tenant for replay, as a stream gap does.
	discards, err := esm.NewRecovery(esm.Recovery{Consumer: consumer, Labels: a.names.ParseCommands, OnGap: a.handler.OnGap,
		Log: a.log.Named("esm")}, nil)
	if err != nil {
		return nil, err
	}
	// A user.erased record starts its erasure and goes; resume-erasures goes on with it.
	a.handler.DetachErasures()
	deliverWebhooks, err := a.webhookTask(ctx)
	if err != nil {
		return nil, err
	}
	return &lambdafn.Function{
		Discards: discards,
		Log:      a.log,
		Stream: esm.New(esm.Config{Labels: a.names.ParseCommands, DeadLetters: dl, Handle: a.handler.HandleMessage,
			Log: a.log.Named("esm")}),
		Tasks: map[string]func(context.Context) error{
			"deliver-webhooks": deliverWebhooks,
			"redrive-dead-letters": func(ctx context.Context) error {
				// Within the invocation's time (less a margin); the next run goes on from
				// where this one stopped.
				res, err := dl.Redrive(ctx, deadletters.Filter{}, a.handler.Apply, 0)
				if err == nil && (res.Applied > 0 || res.FailedCount > 0) {
					a.log.Info("dead letters re-driven", zap.Int("applied", res.Applied), zap.Int("still_failing", res.FailedCount),
						zap.Bool("more", res.More))
				}
				return err
			},
			// The members whose expiry has come (docs/expiry.md): every minute.
			"expire-memberships": a.expireOnce,
			// The change feed to SSO_EVENTBRIDGE_BUS, each tenant up to its head as of the
			// run (docs/events.md, "EventBridge"); without a bus, nothing.
			"publish-events": func(ctx context.Context) error {
				if a.bus == nil {
					return nil
				}
				n, err := a.bus.Once(ctx)
				if n > 0 {
					a.log.Info("changes published to the bus", zap.Int("published", n))
				}
				return err
			},
			// Every pending erasure, until the invocation's deadline less a margin
			// (docs/erasure.md, "The bound").
			// Then, with the time left, a bounded share of the member index's backfill of
			// tenants from before it (memberindex.go).
			"resume-erasures": func(ctx context.Context) error {
				res, err := a.eraser.ResumePending(ctx, 0)
				if res.Resumed > 0 || res.Left > 0 {
					a.log.Info("erasures resumed", zap.Int("pending", res.Pending), zap.Int("resumed", res.Resumed),
						zap.Int("finished", res.Finished), zap.Int("left_for_the_next_run", res.Left))
				}
				return errors.Join(err, a.memberIndexRound(ctx))
			},
		},
	}, nil
}
