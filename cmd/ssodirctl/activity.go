package main

import (
	"github.com/spf13/cobra"

	"github.com/ssodir/ssodir/client"
)

// printActivity prints a feed, newest first, at most max items (0: all).
func printActivity(cmd *cobra.Command, s *settings, f client.ActivityFilter, max int) error {
	t, p, err := s.tenantPrinter(cmd.Context())
	if err != nil {
		return err
	}
	f.Limit = 500
	if max > 0 && max < 500 {
		f.Limit = max
	}
	items, rows := []client.Activity{}, [][]string{}
	for a, err := range t.Activity(cmd.Context(), f) {
		if err != nil {
			return err
		}
		items, rows = append(items, a), append(rows, activityRow(a))
		if max > 0 && len(items) == max {
			break
		}
	}
	return p.list(items, activityHeader, rows)
}

// entityActivity is `users activity USERNAME` and `groups activity NAME`.
func entityActivity(s *settings, kind string) *cobra.Command {
	var max int
	arg := map[string]string{"user": "USERNAME", "group": "NAME"}[kind]
	cmd := &cobra.Command{
		Use:     "activity " + arg,
		Short:   "What happened to this " + kind + ", newest first",
		Example: "  ssodirctl " + kind + "s activity " + map[string]string{"user": "jdoe", "group": "admins"}[kind] + " --max 20",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return printActivity(cmd, s, client.ActivityFilter{Entity: kind + ":" + args[0]}, max)
		},
	}
	cmd.Flags().IntVar(&max, "max", 50, "show at most this many (0: all)")
	return cmd
}

func activityCommand(s *settings) *cobra.Command {
	var actor, day string
	var max int
	cmd := &cobra.Command{
		Use:   "activity (--actor ACTOR | --day YYYY-MM-DD)",
		Short: "What an actor did, or everything on a UTC day, newest first",
		Example: `  ssodirctl activity --actor bootstrap
  ssodirctl activity --day 2026-11-21 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (actor == "") == (day == "") {
				return usagef("give one of --actor and --day (for a user or group: users activity, groups activity)")
			}
			return printActivity(cmd, s, client.ActivityFilter{Actor: actor, Day: day}, max)
		},
	}
	cmd.Flags().StringVar(&actor, "actor", "", "the actor (a JWT's sub, or bootstrap)")
	cmd.Flags().StringVar(&day, "day", "", "a UTC day, YYYY-MM-DD")
	cmd.Flags().IntVar(&max, "max", 50, "show at most this many (0: all)")
	return cmd
}
