package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ssodir/ssodir/client"
)

func groupsCommand(s *settings) *cobra.Command {
	cmd := group("groups", "Create, read, change and delete groups, and their members")
	members := group("members", "List, add and remove a group's members")
	members.AddCommand(memberList(s), memberChange(s, "add"), memberChange(s, "remove"))
	cmd.AddCommand(groupCreate(s), groupGet(s), groupList(s), groupUpdate(s), groupRename(s), groupDelete(s), members, entityActivity(s, "group"))
	return cmd
}

func groupCreate(s *settings) *cobra.Command {
	var in client.NewGroup
	var attrs []string
	var key string
	var rb readBack
	cmd := &cobra.Command{
		Use:     "create NAME",
		Short:   "Create a group",
		Example: `  ssodirctl groups create "Site Admins" --description "people who run the site"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, p, err := s.tenantPrinter(cmd.Context())
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
			rb.group(cmd.Context(), s, t, g.Name, g.Version)
			return p.one(g, groupHeader, groupRow(*g))
		},
	}
	rb.add(cmd)
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
			t, p, err := s.tenantPrinter(cmd.Context())
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
			t, p, err := s.tenantPrinter(cmd.Context())
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
			t, p, err := s.tenantPrinter(cmd.Context())
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
			w.group(cmd.Context(), s, t, g.Name, g.Version)
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
		(*client.TenantClient).DeleteGroup, readBack.group)
}

func memberList(s *settings) *cobra.Command {
	return &cobra.Command{
		Use:     "list GROUP",
		Short:   "List a group's members as users, by username",
		Example: "  ssodirctl groups members list admins",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, p, err := s.tenantPrinter(cmd.Context())
			if err != nil {
				return err
			}
			items, rows := []client.User{}, [][]string{}
			for u, err := range t.GroupMembers(cmd.Context(), args[0], 500) {
				if err != nil {
					return err
				}
				items, rows = append(items, u), append(rows, append(userRow(u), u.ExpiresAt))
			}
			return p.list(items, append(slices.Clone(userHeader), "EXPIRES"), rows)
		},
	}
}

func memberChange(s *settings, verb string) *cobra.Command {
	var (
		w         writeFlags
		expiresAt string
	)
	short := "Add users to a group, in one command (fine for those already members)"
	if verb == "remove" {
		short = "Remove users from a group, in one command (fine for those not members)"
	}
	cmd := &cobra.Command{
		Use:   verb + " GROUP USERNAME...",
		Short: short,
		Long: short + `.

All the users go in one command on the group (POST /groups/{name}/members): one new group
version for the whole change, or none when nothing changes, and all or nothing: if any
user does not exist, nothing changes and each unknown user is named (exit 3). More than
1,000 usernames are sent as several commands of up to 1,000, each all or nothing (then
--if-match is refused, and --idempotency-key gets a suffix per command).`,
		Example: "  ssodirctl groups members " + verb + " admins jdoe asmith\n  cat usernames.txt | xargs ssodirctl groups members " + verb + " admins",
		Args:    cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := s.tenantClient(cmd.Context())
			if err != nil {
				return err
			}
			group, users := args[0], args[1:]
			chunks := client.MembersChunks(users, nil)
			if verb == "remove" {
				chunks = client.MembersChunks(nil, users)
			}
			if expiresAt != "" {
				at, err := time.Parse(time.RFC3339Nano, expiresAt)
				if err != nil {
					return usagef("--expires-at: %q is not an RFC 3339 instant (such as 2030-03-31T17:00:00Z)", expiresAt)
				}
				if len(users) == 1 {
					// One member: PUT, which also sets or moves the expiry of a member.
					r, err := t.SetMemberExpiry(cmd.Context(), group, users[0], &at, w.options()...)
					if err != nil {
						return err
					}
					w.group(cmd.Context(), s, t, group, r.Version)
					fmt.Fprintf(s.io.out, "%s: added %s until %s (group version %d)\n", group, users[0], at.UTC().Format(time.RFC3339), r.Version)
					return nil
				}
				chunks = client.MembersChunksUntil(users, at)
			}
			if len(chunks) > 1 && w.ifMatch > 0 {
				return usagef("--if-match applies to one command; %d usernames take %d", len(users), len(chunks))
			}
			var g *client.Group
			for i, ch := range chunks {
				opts := w.options()
				if w.key != "" && len(chunks) > 1 {
					opts = append(opts, client.IdempotencyKey(fmt.Sprintf("%s-%d", w.key, i+1)))
				}
				if g, err = t.ChangeMembers(cmd.Context(), group, ch, opts...); err != nil {
					return err
				}
			}
			w.group(cmd.Context(), s, t, group, g.Version)
			who := strings.Join(users, " ")
			if len(users) > 10 {
				who = fmt.Sprintf("%d users", len(users))
			}
			fmt.Fprintf(s.io.out, "%s: %s %s (group version %d)\n", g.Name, map[string]string{"add": "added", "remove": "removed"}[verb], who, g.Version)
			return nil
		},
	}
	w.add(cmd)
	if verb == "add" {
		cmd.Flags().StringVar(&expiresAt, "expires-at", "", "RFC 3339 instant at which the memberships added end by themselves "+
			"(one user: also sets or moves the expiry of a member; several: users already members keep theirs)")
	}
	return cmd
}
