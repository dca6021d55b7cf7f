package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ssodir/ssodir/client"
)

// userErase is `ssodirctl users erase USERNAME --reason TEXT`: the erasure of a person
// (scope directory:erase), waited for until done unless --wait=false.
func userErase(s *settings) *cobra.Command {
	var (
		reason  string
		all     bool
		ifMatch int64
		key     string
		wait    bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "erase USERNAME",
		Short: "Erase a person: every trace of the user, in every table, the activity and Keycloak (docs/erasure.md)",
		Example: `  ssodirctl users erase jdoe --reason "GDPR request, ticket 4411"
  ssodirctl users erase jdoe --reason "..." --wait=false
  ssodirctl users erase jdoe --reason "..." --all-incarnations`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if reason == "" {
				return usagef("--reason is required: why the person is erased (it must not name them)")
			}
			t, err := s.tenantClient(cmd.Context())
			if err != nil {
				return err
			}
			var opts []client.Option
			if ifMatch > 0 {
				opts = append(opts, client.IfMatch(ifMatch))
			}
			if key != "" {
				opts = append(opts, client.IdempotencyKey(key))
			}
			e, err := t.EraseUserWith(cmd.Context(), args[0], client.EraseRequest{Reason: reason, AllIncarnations: all}, opts...)
			if err != nil {
				return err
			}
			fmt.Fprintf(s.io.out, "erasure %s of %s accepted\n", e.ErasureID, args[0])
			if !wait {
				return nil
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			note := waitNote(s.io.err, fmt.Sprintf("until erasure %s is done: its second pass over the read side comes about 30 s after the first (SSO_ERASURE_SETTLE); --wait=false returns at once", e.ErasureID))
			done, err := t.WaitErasure(ctx, e.ErasureID, time.Second)
			note()
			if err != nil {
				return err
			}
			fmt.Fprintf(s.io.out, "erasure %s done at %s\n", done.ErasureID, deref(done.CompletedAt))
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why the person is erased (kept in the erasure ledger; must not name them)")
	cmd.Flags().BoolVar(&all, "all-incarnations", false, "also erase the earlier users deleted under the name (by default only the one it resolves to: the live user, or the latest deleted)")
	cmd.Flags().Int64Var(&ifMatch, "if-match", 0, "only if the user's version is this one (else exit 4)")
	cmd.Flags().StringVar(&key, "idempotency-key", "", "Idempotency-Key: a retry with the same key has its effect once")
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until the erasure is done")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long --wait waits")
	return cmd
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
