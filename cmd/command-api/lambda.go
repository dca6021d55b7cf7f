package main

import (
	"context"
	"maps"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/config"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/lambdafn"
	"github.com/ssodir/ssodir/internal/process"
)

// runLambda serves the command API as a Lambda function behind an HTTP API or a Function
// URL (docs/aws.md, "Lambda mode"). A function is frozen once it answers, so a
// provisioning answered 202 is finished by the scheduled task resume-provisioning (every
// minute), which also finishes what a stopped invocation left: the same Finish the
// long-running API runs in the background.
func runLambda(ctx context.Context, cfg config.CommandAPI, log *zap.Logger, e *echo.Echo) error {
	clients, err := process.NewClients(ctx, "command-api", cfg.Common)
	if err != nil {
		return err
	}
	box, err := process.NewSecrets(ctx, cfg.Common, clients.AWS)
	if err != nil {
		return err
	}
	tenants := dynamo.NewTenantStore(clients.DB, dynamo.Names{Prefix: cfg.TablePrefix}).WithTableSettings(process.TableSettings(cfg.Common)).WithTableQuota(cfg.TableQuota)
	tasks := map[string]func(context.Context) error{}
	if cfg.Lambda.Enabled() {
		m := process.NewMappings(clients.AWS, cfg.Lambda, log)
		tenants.WithMappings(m)
		// A consumer whose mapping stopped polling publishes no IteratorAge: this check,
		// on a schedule, logs each one (deploy/ alarms on the lines).
		tasks["check-mappings"] = func(ctx context.Context) error {
			_, err := m.Check(ctx)
			return err
		}
	}
	provision := commands.NewProvisionTenantHandler(tenants, box, time.Now)
	maps.Copy(tasks, map[string]func(context.Context) error{
		"resume-provisioning": func(ctx context.Context) error {
			if n, err := tenants.CountTables(ctx); err != nil {
				log.Warn("could not count the stage's tables", zap.Error(err))
			} else {
				log.Info(commands.StageTablesMessage, zap.Int("tables", n))
			}
			recs, err := tenants.ProvisioningTenants(ctx)
			if err != nil {
				return err
			}
			// Side by side, paced by DynamoDB's limit on concurrent creations, and ending
			// before the invocation's deadline: what is left is finished a minute later.
			res, err := provision.FinishPending(ctx, recs, commands.FinishPendingOptions{
				OnFinished: func(rec commands.TenantRecord) {
					log.Info("tenant provisioned", zap.String("system", rec.System), zap.String("tenant", rec.ID))
				},
			})
			if res.Left > 0 {
				log.Info("tenants left provisioning for the next round", zap.Int("finished", res.Finished), zap.Int("left", res.Left))
			}
			return err
		},
	})
	lambdafn.Start(&lambdafn.Function{HTTP: e, Log: log, Tasks: tasks})
	return nil
}
