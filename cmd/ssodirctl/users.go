package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ssodir/ssodir/client"
)

// writeFlags are the options every write to an existing user or group takes.
type writeFlags struct {
	ifMatch int64
	key     string
	readBack
}

func (w *writeFlags) add(cmd *cobra.Command) {
	cmd.Flags().Int64Var(&w.ifMatch, "if-match", 0, "only if the user's (or group's) version is this one (else exit 4)")
	cmd.Flags().StringVar(&w.key, "idempotency-key", "", "Idempotency-Key: a retry with the same key has its effect once")
	w.readBack.add(cmd)
}

func (w *writeFlags) options() []client.Option {
	var opts []client.Option
	if w.ifMatch > 0 {
		opts = append(opts, client.IfMatch(w.ifMatch))
	}
	if w.key != "" {
		opts = append(opts, client.IdempotencyKey(w.key))
	}
	return opts
}

// parseAttrs reads repeated key=value flags into Keycloak-shaped attributes; a key given
// twice gets both values.
func parseAttrs(pairs []string) (map[string][]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	out := map[string][]string{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usagef("--attr %q: want key=value", p)
		}
		out[k] = append(out[k], v)
	}
	return out, nil
}

// readPassword reads a password from the terminal without echo (asking twice), or the
// first line of stdin when it is not a terminal. Never from a flag: flags end up in shell
// histories and process lists.
func readPassword(s *settings, prompt string) (string, error) {
	if f, ok := s.io.in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(s.io.err, prompt+": ")
		a, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(s.io.err)
		if err != nil {
			return "", err
		}
		fmt.Fprint(s.io.err, "again: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(s.io.err)
		if err != nil {
			return "", err
		}
		if string(a) != string(b) {
			return "", usagef("the passwords differ")
		}
		return string(a), nil
	}
	line, err := bufio.NewReader(s.io.in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", usagef("no password on stdin")
	}
	return line, nil
}

func usersCommand(s *settings) *cobra.Command {
	cmd := group("users", "Create, read, change and delete users")
	cmd.AddCommand(userCreate(s), userGet(s), userList(s), userUpdate(s),
		userAction(s, "activate", "Activate a user (nothing changes if active)"),
		userAction(s, "deactivate", "Deactivate a user (nothing changes if inactive)"),
		userSetPassword(s), userRename(s), userDelete(s), userErase(s), userGroups(s), entityActivity(s, "user"))
	return cmd
}

func userCreate(s *settings) *cobra.Command {
	var in client.NewUser
	var attrs []string
	var inactive, withPassword bool
	var key string
	var rb readBack
	cmd := &cobra.Command{
		Use:   "create USERNAME",
		Short: "Create a user",
		Example: `  ssodirctl users create jdoe --email jdoe@example.com --first-name Jane --last-name Doe --attr dept=eng
  printf '%s\n' "$PASSWORD" | ssodirctl users create jdoe --email jdoe@example.com --password`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, p, err := s.tenantPrinter(cmd.Context())
			if err != nil {
				return err
			}
			in.Username = args[0]
			if in.Attributes, err = parseAttrs(attrs); err != nil {
				return err
			}
			if inactive {
				f := false
				in.IsActive = &f
			}
			if withPassword {
				if in.Password, err = readPassword(s, "password for "+in.Username); err != nil {
					return err
				}
			}
			var opts []client.Option
			if key != "" {
				opts = append(opts, client.IdempotencyKey(key))
			}
			u, err := t.CreateUser(cmd.Context(), in, opts...)
			if err != nil {
				return err
			}
			rb.user(cmd.Context(), s, t, u.Username, u.Version)
			return p.one(u, userHeader, userRow(*u))
		},
	}
	rb.add(cmd)
	f := cmd.Flags()
	f.StringVar(&in.Email, "email", "", "email address")
	f.StringVar(&in.FirstName, "first-name", "", "first name")
	f.StringVar(&in.LastName, "last-name", "", "last name")
	f.StringArrayVar(&attrs, "attr", nil, "attribute key=value (repeat for more values or keys)")
	f.BoolVar(&inactive, "inactive", false, "create the user deactivated")
	f.BoolVar(&withPassword, "password", false, "set a password, read from a prompt (or the first line of stdin)")
	f.StringVar(&key, "idempotency-key", "", "Idempotency-Key: a retry with the same key creates the user once")
	return cmd
}

func userGet(s *settings) *cobra.Command {
	var minVersion int64
	cmd := &cobra.Command{
		Use:     "get USERNAME",
		Short:   "Show a user",
		Example: "  ssodirctl users get jdoe -o yaml",
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
			u, err := t.GetUser(cmd.Context(), args[0], opts...)
			if err != nil {
				return err
			}
			return p.one(u, userHeader, userRow(*u))
		},
	}
	cmd.Flags().Int64Var(&minVersion, "min-version", 0, "wait (up to 5 s) until the view shows at least this version")
	return cmd
}

func userList(s *settings) *cobra.Command {
	var f client.UserFilter
	var oldest bool
	var max int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List users (all, by email, or by a username or name prefix)",
		Example: `  ssodirctl users list
  ssodirctl users list --username-prefix jd
  ssodirctl users list --last-name-prefix do
  ssodirctl users list --email jdoe@example.com -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, p, err := s.tenantPrinter(cmd.Context())
			if err != nil {
				return err
			}
			if oldest {
				f.Order = client.UpdatedAsc
			}
			f.Limit = 500
			if max > 0 && max < 500 {
				f.Limit = max
			}
			items, rows := []client.User{}, [][]string{}
			for u, err := range t.Users(cmd.Context(), f) {
				if err != nil {
					return err
				}
				items, rows = append(items, u), append(rows, userRow(u))
				if max > 0 && len(items) == max {
					break
				}
			}
			return p.list(items, userHeader, rows)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Email, "email", "", "the user with this email (any case)")
	fl.StringVar(&f.UsernamePrefix, "username-prefix", "", "users whose username starts with this (any case), by username")
	fl.StringVar(&f.LastNamePrefix, "last-name-prefix", "", "users whose last name starts with this (any case), by last name")
	fl.StringVar(&f.FirstNamePrefix, "first-name-prefix", "", "users whose first name starts with this (any case), by first name")
	fl.BoolVar(&oldest, "oldest-first", false, "all users, least recently updated first (default most recent first)")
	fl.IntVar(&max, "max", 0, "show at most this many (default all)")
	return cmd
}

func userUpdate(s *settings) *cobra.Command {
	var email, first, last string
	var attrs []string
	var clearAttrs bool
	var w writeFlags
	cmd := &cobra.Command{
		Use:   "update USERNAME",
		Short: "Change a user's email, names or attributes (--attr replaces all attributes)",
		Example: `  ssodirctl users update jdoe --last-name Dough --if-match 3
  ssodirctl users update jdoe --attr dept=eng --attr dept=ops`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, p, err := s.tenantPrinter(cmd.Context())
			if err != nil {
				return err
			}
			var patch client.UserPatch
			fl := cmd.Flags()
			if fl.Changed("email") {
				patch.Email = &email
			}
			if fl.Changed("first-name") {
				patch.FirstName = &first
			}
			if fl.Changed("last-name") {
				patch.LastName = &last
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
			if patch.Email == nil && patch.FirstName == nil && patch.LastName == nil && patch.Attributes == nil {
				return usagef("nothing to change: give --email, --first-name, --last-name, --attr or --clear-attrs")
			}
			u, err := t.UpdateUser(cmd.Context(), args[0], patch, w.options()...)
			if err != nil {
				return err
			}
			w.user(cmd.Context(), s, t, u.Username, u.Version)
			return p.one(u, userHeader, userRow(*u))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&email, "email", "", "new email")
	fl.StringVar(&first, "first-name", "", "new first name")
	fl.StringVar(&last, "last-name", "", "new last name")
	fl.StringArrayVar(&attrs, "attr", nil, "attribute key=value; the given ones replace all attributes")
	fl.BoolVar(&clearAttrs, "clear-attrs", false, "remove every attribute")
	w.add(cmd)
	return cmd
}

func userAction(s *settings, action, short string) *cobra.Command {
	var w writeFlags
	cmd := &cobra.Command{
		Use:     action + " USERNAME",
		Short:   short,
		Example: "  ssodirctl users " + action + " jdoe",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, p, err := s.tenantPrinter(cmd.Context())
			if err != nil {
				return err
			}
			do := t.ActivateUser
			if action == "deactivate" {
				do = t.DeactivateUser
			}
			u, err := do(cmd.Context(), args[0], w.options()...)
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

func userSetPassword(s *settings) *cobra.Command {
	var w writeFlags
	cmd := &cobra.Command{
		Use:   "set-password USERNAME",
		Short: "Set a user's password, read from a prompt or from the first line of stdin",
		Example: `  ssodirctl users set-password jdoe
  printf '%s\n' "$PASSWORD" | ssodirctl users set-password jdoe`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := s.tenantClient(cmd.Context())
			if err != nil {
				return err
			}
			pw, err := readPassword(s, "new password for "+args[0])
			if err != nil {
				return err
			}
			r, err := t.SetPassword(cmd.Context(), args[0], pw, w.options()...)
			if err != nil {
				return err
			}
			w.user(cmd.Context(), s, t, args[0], r.Version)
			fmt.Fprintf(s.io.out, "password of %s set (version %d)\n", args[0], r.Version)
			return nil
		},
	}
	w.add(cmd)
	return cmd
}

func userDelete(s *settings) *cobra.Command {
	return deleteCommand(s, "user", "delete USERNAME", "Delete a user and its memberships", "  ssodirctl users delete jdoe --if-match 4",
		(*client.TenantClient).DeleteUser, readBack.user)
}

// deleteCommand is the delete subcommand of users and groups: one DELETE with the write
// flags (--if-match, --idempotency-key), then one line saying what went.
func deleteCommand(s *settings, kind, use, short, example string,
	del func(*client.TenantClient, context.Context, string, ...client.Option) (client.Result, error),
	wait func(readBack, context.Context, *settings, *client.TenantClient, string, int64)) *cobra.Command {
	var w writeFlags
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		Example: example,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := s.tenantClient(cmd.Context())
			if err != nil {
				return err
			}
			r, err := del(t, cmd.Context(), args[0], w.options()...)
			if err != nil {
				return err
			}
			wait(w.readBack, cmd.Context(), s, t, args[0], r.Version)
			fmt.Fprintf(s.io.out, "%s %s deleted\n", kind, args[0])
			return nil
		},
	}
	w.add(cmd)
	return cmd
}

func userGroups(s *settings) *cobra.Command {
	return &cobra.Command{
		Use:     "groups USERNAME",
		Short:   "List the groups a user belongs to",
		Example: "  ssodirctl users groups jdoe",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, p, err := s.tenantPrinter(cmd.Context())
			if err != nil {
				return err
			}
			items, rows := []client.Group{}, [][]string{}
			for g, err := range t.UserGroups(cmd.Context(), args[0], 500) {
				if err != nil {
					return err
				}
				items, rows = append(items, g), append(rows, groupRow(g))
			}
			return p.list(items, groupHeader, rows)
		},
	}
}

func userFilterOldestFirst() client.UserFilter {
	return client.UserFilter{Order: client.UpdatedAsc, Limit: 500}
}
