package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ssodir/ssodir/client"
)

func groupsCommand(s *settings) *cobra.Command {
	cmd := group("groups", "Create, read, change and delete groups, and their members")
	members := group("members", "List, add and remove a group's members")
	members.AddCommand(memberList(s), memberChange(s, "add"), memberChange(s, "remove"))
	cmd.AddCommand(groupCreate(s), groupGet(s), groupList(s), groupUpdate(s), groupDelete(s), members, entityActivity(s, "group"))
	return cmd
}

func groupCreate(s *settings) *cobra.Command {
	var in client.NewGroup
	var attrs []string
	var key string
	cmd := &cobra.Command{
		Use:     "create NAME",
		Short:   "Create a group",
		Example: `  ssodirctl groups create "Site Admins" --description "people who run the site"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := s.tenantClient(cmd.Context())
			if err != nil {
				return err
			}
			p, err := s.printer()
			if err != nil {
				return err
			}
			in.Name = args[0]
			if in.Attributes, err = parseAttrs(attrs); err != nil {
				return err
			}
			var opts []client.Option
			if key != "" {
				opts = append(opts, client.IdempotencyKey(key))
			}
			g, err := t.CreateGroup(cmd.Context(), in, opts...)
			if err != nil {
				return err
			}
			return p.one(g, groupHeader, groupRow(*g))
		},
	}
	cmd.Flags().StringVar(&in.Description, "description", "", "description")
	cmd.Flags().StringArrayVar(&attrs, "attr", nil, "attribute key=value (repeat for more)")
	cmd.Flags().StringVar(&key, "idempotency-key", "", "Idempotency-Key: a retry with the same key creates the group once")
	return cmd
}

func groupGet(s *settings) *cobra.Command {
	var minVersion int64
	cmd := &cobra.Command{
		Use:     "get NAME",
		Short:   "Show a group (its name in any case)",
		Example: `  ssodirctl groups get "site admins" -o json`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := s.tenantClient(cmd.Context())
			if err != nil {
				return err
			}
			p, err := s.printer()
			if err != nil {
				return err
			}
			var opts []client.Option
			if minVersion > 0 {
				opts = append(opts, client.MinVersion(minVersion))
			}
			g, err := t.GetGroup(cmd.Context(), args[0], opts...)
			if err != nil {
				return err
			}
			return p.one(g, groupHeader, groupRow(*g))
		},
	}
	cmd.Flags().Int64Var(&minVersion, "min-version", 0, "wait (up to 5 s) until the view shows at least this version")
	return cmd
}

func groupList(s *settings) *cobra.Command {
	var max int
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List groups by name",
		Example: "  ssodirctl groups list -o yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := s.tenantClient(cmd.Context())
			if err != nil {
				return err
			}
			p, err := s.printer()
			if err != nil {
				return err
			}
			items, rows := []client.Group{}, [][]string{}
			for g, err := range t.Groups(cmd.Context(), 500) {
				if err != nil {
					return err
				}
				items, rows = append(items, g), append(rows, groupRow(g))
				if max > 0 && len(items) == max {
					break
				}
			}
			return p.list(items, groupHeader, rows)
		},
	}
	cmd.Flags().IntVar(&max, "max", 0, "show at most this many (default all)")
	return cmd
}

func groupUpdate(s *settings) *cobra.Command {
	var desc string
	var attrs []string
	var clearAttrs bool
	var w writeFlags
	cmd := &cobra.Command{
		Use:     "update NAME",
		Short:   "Change a group's description or attributes (--attr replaces all attributes)",
		Example: `  ssodirctl groups update admins --description "the admins" --if-match 2`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := s.tenantClient(cmd.Context())
			if err != nil {
				return err
			}
			p, err := s.printer()
			if err != nil {
				return err
			}
			var patch client.GroupPatch
			if cmd.Flags().Changed("description") {
				patch.Description = &desc
			}
			if patch.Attributes, err = parseAttrs(attrs); err != nil {
				return err
			}
			if clearAttrs {
				if patch.Attributes != nil {
					return usagef("--attr and --clear-attrs exclude each other")
				}
				patch.Attributes = map[string][]string{}
			}
			if patch.Description == nil && patch.Attributes == nil {
				return usagef("nothing to change: give --description, --attr or --clear-attrs")
			}
			g, err := t.UpdateGroup(cmd.Context(), args[0], patch, w.options()...)
			if err != nil {
				return err
			}
			return p.one(g, groupHeader, groupRow(*g))
		},
	}
	cmd.Flags().StringVar(&desc, "description", "", "new description")
	cmd.Flags().StringArrayVar(&attrs, "attr", nil, "attribute key=value; the given ones replace all attributes")
	cmd.Flags().BoolVar(&clearAttrs, "clear-attrs", false, "remove every attribute")
	w.add(cmd)
	return cmd
}

func groupDelete(s *settings) *cobra.Command {
	return deleteCommand(s, "group", "delete NAME", "Delete a group and its memberships", "  ssodirctl groups delete admins",
		(*client.TenantClient).DeleteGroup)
}

func memberList(s *settings) *cobra.Command {
	return &cobra.Command{
		Use:     "list GROUP",
		Short:   "List a group's members as users, by username",
		Example: "  ssodirctl groups members list admins",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := s.tenantClient(cmd.Context())
			if err != nil {
				return err
			}
			p, err := s.printer()
			if err != nil {
				return err
			}
			items, rows := []client.User{}, [][]string{}
			for u, err := range t.GroupMembers(cmd.Context(), args[0], 500) {
				if err != nil {
					return err
				}
				items, rows = append(items, u), append(rows, userRow(u))
			}
			return p.list(items, userHeader, rows)
		},
	}
}

func memberChange(s *settings, verb string) *cobra.Command {
	var w writeFlags
	short := "Add users to a group (fine when already members)"
	if verb == "remove" {
		short = "Remove users from a group (fine when not members)"
	}
	cmd := &cobra.Command{
		Use:     verb + " GROUP USERNAME...",
		Short:   short,
		Example: "  ssodirctl groups members " + verb + " admins jdoe asmith",
		Args:    cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := s.tenantClient(cmd.Context())
			if err != nil {
				return err
			}
			do := t.AddMember
			if verb == "remove" {
				do = t.RemoveMember
			}
			for _, u := range args[1:] {
				r, err := do(cmd.Context(), args[0], u, w.options()...)
				if err != nil {
					return err
				}
				fmt.Fprintf(s.io.out, "%s: %s %s (group version %d)\n", args[0], map[string]string{"add": "added", "remove": "removed"}[verb], u, r.Version)
			}
			return nil
		},
	}
	w.add(cmd)
	return cmd
}
