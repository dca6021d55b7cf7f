package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
)

func exportCommand(s *settings) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "export (users | groups)",
		Short: "Write a tenant's users or groups as JSON Lines, the format import reads",
		Long: `Write a tenant's users (with the names of their groups) or groups as JSON Lines, the
format import users and import groups read: for backups and moves between tenants.
Passwords are never readable, so they are never exported.`,
		Example: `  ssodirctl export users > users.jsonl
  ssodirctl export groups --file groups.jsonl
  ssodirctl export users -t old | ssodirctl import users -t new --format jsonl -`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"users", "groups"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "users" && args[0] != "groups" {
				return usagef("export %q: want users or groups", args[0])
			}
			t, err := s.tenantClient(cmd.Context())
			if err != nil {
				return err
			}
			var w io.Writer = s.io.out
			if out != "" && out != "-" {
				f, err := os.Create(out)
				if err != nil {
					return usagef("%v", err)
				}
				defer f.Close()
				w = f
			}
			bw := bufio.NewWriter(w)
			enc := json.NewEncoder(bw)
			ctx := cmd.Context()
			n := 0
			if args[0] == "groups" {
				for g, err := range t.Groups(ctx, 500) {
					if err != nil {
						return err
					}
					if err := enc.Encode(groupRecord{Name: g.Name, Description: g.Description, Attributes: nonEmpty(g.Attributes)}); err != nil {
						return err
					}
					n++
				}
			} else {
				// Memberships are read group by group: one walk per group instead of one
				// request per user.
				memberOf := map[string][]string{}
				for g, err := range t.Groups(ctx, 500) {
					if err != nil {
						return err
					}
					for u, err := range t.GroupMembers(ctx, g.Name, 500) {
						if err != nil {
							return err
						}
						memberOf[u.Username] = append(memberOf[u.Username], g.Name)
					}
				}
				for u, err := range t.Users(ctx, userFilterOldestFirst()) {
					if err != nil {
						return err
					}
					groups := memberOf[u.Username]
					sort.Slice(groups, func(i, j int) bool { return strings.ToLower(groups[i]) < strings.ToLower(groups[j]) })
					active := u.IsActive
					rec := userRecord{Username: u.Username, Email: u.Email, FirstName: u.FirstName, LastName: u.LastName,
						IsActive: &active, Attributes: nonEmpty(u.Attributes), Groups: groups}
					if err := enc.Encode(rec); err != nil {
						return err
					}
					n++
				}
			}
			if err := bw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(s.io.err, "exported %d %s\n", n, args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "file", "", "write to this file instead of stdout")
	return cmd
}

func nonEmpty(m map[string][]string) map[string][]string {
	if len(m) == 0 {
		return nil
	}
	return m
}
