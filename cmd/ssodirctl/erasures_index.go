package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/memberindex"
)

// erasuresIndexMembers is `ssodirctl erasures index-members`: the member index's
// backfill of a tenant from before it (docs/erasure.md, "The member index"), run here to
// completion, call by call, with its progress. The projector runs it too, a bounded share
// at a time; both take the tenant's lease, so they never work on it at once. Like
// `erasures reapply`, it works on DynamoDB directly with the operator's credentials.
func erasuresIndexMembers(s *settings) *cobra.Command {
	var status bool
	cmd := &cobra.Command{
		Use:   "index-members --system S --tenant T [--status]",
		Short: "Index the group records of a tenant from before the member index, so that its erasures need no Scan of its write table",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			system, tenant, cfg, clients, err := s.adminClients(ctx)
			if err != nil {
				return err
			}
			names := dynamo.Names{Prefix: cfg.TablePrefix}
			row, err := dynamo.NewTenants(clients.DB, names).Get(ctx, system, tenant)
			if err != nil {
				return err
			}
			ix := memberindex.New(clients.DB, events.NewRegistry(), memberindex.Options{})
			name := system + "/" + tenant
			if status {
				p, err := ix.Status(ctx, row.CommandsTable)
				if err != nil {
					return err
				}
				fmt.Fprintf(s.io.out, "%s: member index %s\n", name, p)
				return nil
			}
			for {
				p, err := ix.Step(ctx, row.CommandsTable)
				if err != nil {
					return err
				}
				if p.HeldUntil.IsZero() && p.Segs > 0 {
					fmt.Fprintf(s.io.err, "%s: %s\n", name, p)
				}
				if p.Complete {
					fmt.Fprintf(s.io.out, "%s: member index complete\n", name)
					return nil
				}
				if p.HeldUntil.IsZero() {
					continue
				}
				done := waitNote(s.io.err, fmt.Sprintf("until %s, when another process's lease on the backfill of %s runs out (%s)",
					dynamo.FormatTime(p.HeldUntil), name, p))
				select {
				case <-ctx.Done():
					done()
					return ctx.Err()
				case <-time.After(time.Until(p.HeldUntil) + 100*time.Millisecond):
				}
				done()
			}
		},
	}
	cmd.Flags().BoolVar(&status, "status", false, "only say where the backfill stands")
	return cmd
}
