package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ssodir/ssodir/internal/config"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/process"
)

// adminClients are the tenant's names, the services' configuration (their environment)
// and DynamoDB clients with the operator's credentials: what the commands that work on
// DynamoDB directly (erasures reapply, resume, index-members) start from.
func (s *settings) adminClients(ctx context.Context) (system, tenant string, cfg config.Projector, clients *dynamo.Clients, err error) {
	system, tenant = s.system, s.tenant
	if system == "" || tenant == "" {
		return "", "", cfg, nil, usagef("which tenant? set --system and --tenant (or SSODIR_SYSTEM and SSODIR_TENANT)")
	}
	if cfg, err = config.LoadProjector(s.env); err != nil {
		return "", "", cfg, nil, usagef("configuration: %v", err)
	}
	clients, err = process.NewClients(ctx, "ssodirctl-admin", cfg.Common)
	return system, tenant, cfg, clients, err
}

// adminEraser is the eraser over DynamoDB directly, with the operator's credentials and
// the services' environment, as `erasures reapply` uses it.
func adminEraser(ctx context.Context, s *settings) (*erasure.Eraser, string, string, error) {
	system, tenant, cfg, clients, err := s.adminClients(ctx)
	if err != nil {
		return nil, "", "", err
	}
	names := dynamo.Names{Prefix: cfg.TablePrefix}
	x := erasure.NewEraser(clients.DB, names, dynamo.NewTenants(clients.DB, names), events.NewRegistry(), erasure.Options{Settle: cfg.ErasureSettle})
	return x, system, tenant, nil
}

// erasuresList is `ssodirctl erasures list [--pending]`: the tenant's erasures, with the
// places still pending and where the first pass stands (docs/erasure.md, "The bound").
func erasuresList(s *settings) *cobra.Command {
	var pending bool
	cmd := &cobra.Command{
		Use:   "list --system S --tenant T [--pending]",
		Short: "List the tenant's erasures (--pending: those not done), with the places left",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			x, system, tenant, err := adminEraser(cmd.Context(), s)
			if err != nil {
				return err
			}
			var entries []erasure.Entry
			if pending {
				entries, err = x.Ledger().ListPending(cmd.Context(), system, tenant)
			} else {
				entries, err = x.Ledger().List(cmd.Context(), system, tenant)
			}
			if err != nil {
				return err
			}
			sort.Slice(entries, func(i, j int) bool { return entries[i].RequestedAt < entries[j].RequestedAt })
			for _, e := range entries {
				fmt.Fprintln(s.io.out, erasureLine(e))
			}
			if len(entries) == 0 {
				fmt.Fprintln(s.io.err, "no erasures")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&pending, "pending", false, "only the erasures not done")
	return cmd
}

// erasureLine is one erasure: id, status, requested_at, the places left, the first
// pass's position.
func erasureLine(e erasure.Entry) string {
	var left []string
	for p, st := range e.Places {
		if st != dynamo.ErasureStatusDone {
			left = append(left, p)
		}
	}
	sort.Strings(left)
	pos := "-"
	switch {
	case e.Status == dynamo.ErasureStatusDone:
	case e.SweptAt != "":
		pos = "second pass (first done " + e.SweptAt + ")"
	case e.Progress.Phase != "":
		pos = "first pass: " + e.Progress.Phase
		if e.Progress.Segs > 0 {
			pos += fmt.Sprintf(" segment %d/%d", e.Progress.Seg, e.Progress.Segs)
		}
		if !e.Progress.At.IsZero() {
			pos += " at " + dynamo.FormatTime(e.Progress.At)
		}
	default:
		pos = "not started"
	}
	if len(left) == 0 {
		left = []string{"-"}
	}
	return fmt.Sprintf("%s\t%s\t%s\tleft: %s\t%s", e.ErasureID, e.Status, e.RequestedAt, strings.Join(left, ","), pos)
}

// erasuresResume is `ssodirctl erasures resume ID`: the projector's part of one erasure,
// carried on here until it is done (its waits included).
func erasuresResume(s *settings) *cobra.Command {
	return &cobra.Command{
		Use:   "resume ERASURE_ID --system S --tenant T",
		Short: "Carry on a pending erasure from where it stopped, until the projector's part is done",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			x, system, tenant, err := adminEraser(ctx, s)
			if err != nil {
				return err
			}
			id := args[0]
			for {
				again, err := x.Resume(ctx, system, tenant, id)
				if err != nil {
					return err
				}
				if again.IsZero() {
					break
				}
				done := waitNote(s.io.err, fmt.Sprintf("until erasure %s can go on at %s (its second pass comes SSO_ERASURE_SETTLE after the first; another process may hold it until then)", id, dynamo.FormatTime(again)))
				select {
				case <-ctx.Done():
					done()
					return ctx.Err()
				case <-time.After(time.Until(again)):
				}
				done()
			}
			e, err := x.Ledger().Get(ctx, system, tenant, id)
			if err != nil {
				return err
			}
			fmt.Fprintln(s.io.out, erasureLine(e))
			return nil
		},
	}
}
