package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func eventsCommand(s *settings) *cobra.Command {
	cmd := &cobra.Command{Use: "events", Short: "The tenant's change feed (CloudEvents, every change once, each user's and group's in order)"}
	cmd.AddCommand(eventsTail(s))
	return cmd
}

// eventsTail follows the change feed, one CloudEvent a line. The cursor to resume from is
// printed on stderr when it stops, and it is exact: the next tail from it starts with the
// change after the last one printed.
func eventsTail(s *settings) *cobra.Command {
	var from string
	var max int
	var noFollow bool
	cmd := &cobra.Command{
		Use:   "tail [--from CURSOR]",
		Short: "Print the tenant's changes as they come, one CloudEvent (JSON) a line",
		Example: `  ssodirctl events tail
  ssodirctl events tail --from "$(cat cursor)" --max 100 --no-follow 2>cursor.log`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if max < 0 {
				return usagef("--max must not be negative")
			}
			t, err := s.tenantClient(cmd.Context())
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			enc := json.NewEncoder(cmd.OutOrStdout())
			cursor, n := from, 0
			defer func() { fmt.Fprintf(cmd.ErrOrStderr(), "cursor: %s\n", cursor) }()
			for max == 0 || n < max {
				limit := 100
				if max > 0 {
					limit = min(limit, max-n) // a page never goes past --max, so its cursor is exact
				}
				wait := 20 * time.Second
				if noFollow {
					wait = 0
				}
				page, err := t.ReadEvents(ctx, cursor, limit, wait)
				if err != nil {
					if ctx.Err() != nil {
						return nil // interrupted: the cursor printed resumes here
					}
					return err
				}
				for _, ev := range page.Items {
					if err := enc.Encode(ev); err != nil {
						return err
					}
				}
				n += len(page.Items)
				if page.NextCursor != "" {
					cursor = page.NextCursor
				}
				if len(page.Items) == 0 && noFollow {
					return nil
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "a cursor printed by an earlier tail: go on after it (default: from the oldest change kept)")
	cmd.Flags().IntVar(&max, "max", 0, "stop after this many changes (0: never)")
	cmd.Flags().BoolVar(&noFollow, "no-follow", false, "stop at the end of the feed instead of waiting for changes")
	return cmd
}
