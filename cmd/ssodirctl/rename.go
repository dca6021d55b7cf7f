package main

import (
	"github.com/spf13/cobra"
)

// userRename is `ssodirctl users rename OLD NEW`: the same person under a new username.
func userRename(s *settings) *cobra.Command {
	var w writeFlags
	cmd := &cobra.Command{
		Use:   "rename USERNAME NEW_USERNAME",
		Short: "Rename a user: the same person (same id, memberships, history), the old name free at once",
		Example: `  ssodirctl users rename jdoe jane.doe@example.com
  ssodirctl users rename jdoe jane.doe --if-match 3`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, p, err := s.tenantPrinter(cmd.Context())
			if err != nil {
				return err
			}
			u, err := t.RenameUser(cmd.Context(), args[0], args[1], w.options()...)
			if err != nil {
				return err
			}
			w.user(cmd.Context(), s, t, u.Username, u.Version)
			return p.one(u, userHeader, userRow(*u))
		},
	}
	w.add(cmd)
	return cmd
}

// groupRename is `ssodirctl groups rename OLD NEW`: the same group under a new name.
func groupRename(s *settings) *cobra.Command {
	var w writeFlags
	cmd := &cobra.Command{
		Use:   "rename NAME NEW_NAME",
		Short: "Rename a group: the same group (same id, members, history), the old name free at once",
		Example: `  ssodirctl groups rename admins "Site Admins"
  ssodirctl groups rename admins wheel --if-match 3`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, p, err := s.tenantPrinter(cmd.Context())
			if err != nil {
				return err
			}
			g, err := t.RenameGroup(cmd.Context(), args[0], args[1], w.options()...)
			if err != nil {
				return err
			}
			w.group(cmd.Context(), s, t, g.Name, g.Version)
			return p.one(g, groupHeader, groupRow(*g))
		},
	}
	w.add(cmd)
	return cmd
}
