package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/config"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// backfillLookups is `command-api backfill-lookups --system S --tenant T`.
func backfillLookups(ctx context.Context, args []string, env config.Env, stdout io.Writer) error {
	fs := flag.NewFlagSet("backfill-lookups", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	system := fs.String("system", "", "the tenant's system")
	tenant := fs.String("tenant", "", "the tenant")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return fmt.Errorf("usage: command-api backfill-lookups --system S --tenant T")
	}
	if !identity.ValidID(*system) || !identity.ValidID(*tenant) {
		return fmt.Errorf("backfill-lookups: --system and --tenant must be valid ids (%s)", identity.IDRule)
	}
	cfg, err := config.LoadCommandAPI(env)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	clients, err := dynamo.NewClients(ctx, cfg.DynamoEndpoint, cfg.StreamsEndpoint)
	if err != nil {
		return err
	}
	store := dynamo.NewCommandStore(clients.DB, dynamo.Names{Prefix: cfg.TablePrefix}, events.NewRegistry(), cfg.HistoryRetention)
	rep, err := store.BackfillLookups(ctx, commands.Tenant{System: *system, ID: *tenant})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s/%s: %d users and %d groups, %d lookup items written\n", *system, *tenant, rep.Users, rep.Groups, rep.Written)
	return err
}
