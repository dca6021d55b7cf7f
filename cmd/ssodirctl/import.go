package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/client"
)

func importCommand(s *settings) *cobra.Command {
	cmd := group("import", "Bring users and groups in from files or from an existing Keycloak realm")
	cmd.AddCommand(importUsers(s), importGroups(s), importKeycloak(s))
	return cmd
}

// importOptions are the flags of the file imports.
type importOptions struct {
	format      string
	skipInvalid bool
	concurrency int
}

func (o *importOptions) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.format, "format", "", "csv or jsonl (default: from the file's extension; required for -)")
	cmd.Flags().BoolVar(&o.skipInvalid, "skip-invalid", false, "import the valid lines even if others are invalid (they are reported)")
	cmd.Flags().IntVar(&o.concurrency, "concurrency", 8, "requests in flight at once")
}

func openInput(s *settings, path string) (io.ReadCloser, error) {
	if path == "-" {
		return io.NopCloser(s.io.in), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return f, nil
}

// outcome is what became of one line.
type outcome struct {
	line   int
	name   string
	status string // created, unchanged, conflict
	reason string
}

// summary counts the outcomes of an import and lists the conflicts.
type summary struct {
	mu        sync.Mutex
	Created   int           `json:"created"`
	Unchanged int           `json:"unchanged"`
	Invalid   int           `json:"invalid"`
	Conflicts []conflictOut `json:"conflicts"`
	// Groups and Memberships count the groups created for users' group columns and the
	// memberships ensured.
	GroupsCreated int `json:"groups_created,omitempty"`
	Memberships   int `json:"memberships,omitempty"`
}

type conflictOut struct {
	Line   int    `json:"line,omitempty"`
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

func (s *summary) add(o outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch o.status {
	case "created":
		s.Created++
	case "unchanged":
		s.Unchanged++
	default:
		s.Conflicts = append(s.Conflicts, conflictOut{Line: o.line, Name: o.name, Reason: o.reason})
	}
}

func (s *summary) print(p *printer, what string) error {
	sort.Slice(s.Conflicts, func(i, j int) bool {
		if s.Conflicts[i].Line != s.Conflicts[j].Line {
			return s.Conflicts[i].Line < s.Conflicts[j].Line
		}
		return s.Conflicts[i].Name < s.Conflicts[j].Name
	})
	if s.Conflicts == nil {
		s.Conflicts = []conflictOut{}
	}
	if p.format != "table" {
		return p.one(s, nil, nil)
	}
	fmt.Fprintf(p.w, "%s: %d created, %d unchanged, %d conflicts, %d invalid lines skipped\n", what, s.Created, s.Unchanged, len(s.Conflicts), s.Invalid)
	if s.GroupsCreated > 0 || s.Memberships > 0 {
		fmt.Fprintf(p.w, "groups: %d created; memberships: %d ensured\n", s.GroupsCreated, s.Memberships)
	}
	for _, c := range s.Conflicts {
		if c.Line > 0 {
			fmt.Fprintf(p.w, "conflict: line %d: %s: %s\n", c.Line, c.Name, c.Reason)
		} else {
			fmt.Fprintf(p.w, "conflict: %s: %s\n", c.Name, c.Reason)
		}
	}
	return nil
}

// result is the exit for a finished import: 5 when anything was left out.
func (s *summary) result() error {
	if len(s.Conflicts) > 0 || s.Invalid > 0 {
		return &exitError{code: exitIncomplete, msg: fmt.Sprintf("%d conflicts, %d invalid lines: not everything was imported", len(s.Conflicts), s.Invalid)}
	}
	return nil
}

// lineError is a per-line answer of the API (a 4xx other than auth): it makes the line a
// conflict, not the run a failure. Anything else (the API unavailable after retries, the
// network, a refused token) stops the run; running it again resumes it.
func lineError(err error) (*client.Error, bool) {
	var e *client.Error
	if errors.As(err, &e) && e.Status >= 400 && e.Status < 500 && e.Status != 401 && e.Status != 403 && e.Code != client.CodeTenantNotReady {
		return e, true
	}
	return nil, false
}

func importUsers(s *settings) *cobra.Command {
	var o importOptions
	var rb readBack
	var expiresAt string
	cmd := &cobra.Command{
		Use:   "users FILE",
		Short: "Import users from a CSV or JSON Lines file (- for stdin)",
		Long: `Import users from a CSV or JSON Lines file (- for stdin).

Every line is checked first, with the API's own rules and against the other lines (a
username or email on two lines); if any is invalid, all of them are reported with their
line numbers and nothing is written, unless --skip-invalid. Groups named by the lines are
created when missing. Each line is sent with an Idempotency-Key derived from its number
and content, so running the same file again (after a crash, say) writes nothing twice: a
user already there with the same fields counts as unchanged, one with other fields is a
conflict, reported with its reason and left as it is. The memberships go group by group
in commands of up to 1,000 users each (POST /groups/{name}/members), sent while the users
are being created. With --expires-at, every membership the import adds ends by itself
at that instant (a user already a member keeps its own expiry).

With --wait (the default) the import ends only once the query API shows every user it
created and every group at its last version (X-Min-Version), so that the next command
(users list, groups members list) sees them; --wait=false ends as soon as the writes are
accepted.

JSON Lines: one object per line with username (required), email, first_name, last_name,
is_active, attributes ({"key": ["value"]}), groups (["name"]) and password — the format
export writes (without passwords).
CSV: a header row naming the columns username, email, first_name, last_name, is_active,
groups, password and attr.<key>; several groups or attribute values are separated by ';'.`,
		Example: `  ssodirctl import users people.csv
  ssodirctl import users --skip-invalid --concurrency 16 people.jsonl
  ssodirctl export users -t old | ssodirctl import users -t new --format jsonl -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := fileFormat(o.format, args[0])
			if err != nil {
				return err
			}
			if o.concurrency < 1 || o.concurrency > 256 {
				return usagef("--concurrency %d: want 1 to 256", o.concurrency)
			}
			expires, err := importExpiry(expiresAt, time.Now())
			if err != nil {
				return err
			}
			t, p, err := s.tenantPrinter(cmd.Context())
			if err != nil {
				return err
			}
			in, err := openInput(s, args[0])
			if err != nil {
				return err
			}
			defer in.Close()
			var lines []line[userRecord]
			if format == "csv" {
				lines, err = readUsersCSV(in)
			} else {
				lines, err = readJSONLines[userRecord](in)
			}
			if err != nil {
				return err
			}
			validateUsers(lines)
			sum := &summary{}
			if sum.Invalid = problemLines(s.io.err, lines); sum.Invalid > 0 && !o.skipInvalid {
				return usagef("%d of %d lines are invalid (listed above); nothing was written (--skip-invalid imports the others)", sum.Invalid, len(lines))
			}
			ui := &userImport{t: t, start: time.Now().UTC(), sum: sum, expires: expires}
			if err := ui.run(cmd.Context(), s, lines, o.concurrency, rb); err != nil {
				return err
			}
			if err := sum.print(p, "users"); err != nil {
				return err
			}
			return sum.result()
		},
	}
	o.add(cmd)
	rb.add(cmd)
	addExpiryFlag(cmd, &expiresAt)
	return cmd
}

type userImport struct {
	t *client.TenantClient
	// members sends the lines' memberships, group by group, as the lines finish.
	members *importMembers
	// created are the versions of the users this run created, to read them back.
	createdMu sync.Mutex
	created   map[string]int64
	// start is when the run began: a create answered from an earlier run's Idempotency-Key
	// carries that run's created_at.
	start time.Time
	sum   *summary
	// expires is --expires-at (nil: the memberships do not expire).
	expires *time.Time
	// existing are the tenant's users when the run began, by username: a line for one of
	// them is compared, not written, so a second run of a file writes nothing.
	existing map[string]client.User
}

func (ui *userImport) run(ctx context.Context, s *settings, lines []line[userRecord], concurrency int, rb readBack) error {
	// The tenant must be there and active before anything is written.
	if tn, err := ui.t.Get(ctx); err != nil {
		return err
	} else if tn.Status != client.TenantActive {
		return fmt.Errorf("tenant %s/%s is %s; import once it is active", ui.t.System(), ui.t.ID(), tn.Status)
	}
	var valid []line[userRecord]
	groups := map[string]string{}
	for _, l := range lines {
		if len(l.problems) == 0 {
			valid = append(valid, l)
			for _, g := range l.rec.Groups {
				if _, ok := groups[strings.ToLower(g)]; !ok {
					groups[strings.ToLower(g)] = g
				}
			}
		}
	}
	if err := ui.ensureGroups(ctx, groups, concurrency); err != nil {
		return err
	}
	ui.existing = map[string]client.User{}
	for u, err := range ui.t.Users(ctx, client.UserFilter{Limit: 500}) {
		if err != nil {
			return err
		}
		ui.existing[u.Username] = u
	}
	bar := newProgress(s.io.err, isTerminal(s.io.err), len(valid), "users")
	ui.members = newImportMembers(ui.t, ui.sum, ui.expires)
	ui.created = map[string]int64{}
	mctx, stopMembers := context.WithCancel(ctx)
	defer stopMembers()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for _, l := range valid {
		g.Go(func() error {
			defer bar.Add(1)
			return ui.one(gctx, mctx, l)
		})
	}
	err := g.Wait()
	if err != nil {
		stopMembers()
	}
	bar.Finish()
	note := waitNote(s.io.err, "for the group memberships still being written")
	versions, merr := ui.members.wait()
	note()
	if err == nil {
		err = merr
	}
	if err != nil {
		return fmt.Errorf("import stopped (run it again to resume; nothing is written twice): %w", err)
	}
	// What the next command reads must show what this one wrote.
	rb.users(ctx, s, ui.t, ui.created, concurrency)
	rb.groups(ctx, s, ui.t, versions)
	return nil
}

// ensureGroups creates the groups the lines name that the tenant does not have yet.
func (ui *userImport) ensureGroups(ctx context.Context, groups map[string]string, concurrency int) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	var mu sync.Mutex
	for key, name := range groups {
		g.Go(func() error {
			if _, err := ui.t.GetGroup(gctx, name); err == nil {
				return nil
			} else if !client.IsNotFound(err) {
				return err
			}
			_, err := ui.t.CreateGroup(gctx, client.NewGroup{Name: name}, client.IdempotencyKey(importKey("group", 0, key)))
			switch {
			case err == nil:
				mu.Lock()
				ui.sum.GroupsCreated++
				mu.Unlock()
			case client.HasCode(err, client.CodeGroupExists):
			default:
				return fmt.Errorf("group %s: %w", name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// one imports one line: creates the user, or finds it there already, then queues its
// memberships (sent under mctx).
func (ui *userImport) one(ctx, mctx context.Context, l line[userRecord]) error {
	r := l.rec
	in := client.NewUser{Username: r.Username, Email: r.Email, FirstName: r.FirstName, LastName: r.LastName,
		IsActive: r.IsActive, Attributes: r.Attributes, Password: r.Password}
	o := outcome{line: l.no, name: r.Username, status: "created"}
	var err error
	if have, ok := ui.existing[r.Username]; ok {
		o.status, o.reason = compareUser(have, r)
		return ui.finish(mctx, l, o)
	}
	keyed := r
	keyed.Password = ""
	u, err := ui.t.CreateUser(ctx, in, client.IdempotencyKey(importKey("user", l.no, keyed)))
	switch {
	case err == nil:
		// A user the views did not show yet at the start, answered from this line's key
		// by an earlier run, carries that run's created_at.
		if created, perr := time.Parse(time.RFC3339, u.CreatedAt); perr == nil && created.Before(ui.start) {
			o.status = "unchanged"
		}
		ui.createdMu.Lock()
		ui.created[u.Username] = u.Version
		ui.createdMu.Unlock()
	case client.HasCode(err, client.CodeUsernameTaken):
		have, gerr := ui.takenUser(ctx, r.Username)
		switch {
		case client.IsNotFound(gerr):
			o.status, o.reason = "conflict", "the username is taken (by a user being deleted or created right now)"
		case gerr != nil:
			return gerr
		default:
			o.status, o.reason = compareUser(*have, r)
		}
	default:
		e, perLine := lineError(err)
		if !perLine {
			return fmt.Errorf("line %d (%s): %w", l.no, r.Username, err)
		}
		o.status, o.reason = "conflict", reason(e)
	}
	return ui.finish(mctx, l, o)
}

// takenUser reads the user that holds a username the command API just called taken. The
// views may not show a user created a moment ago yet, so a 404 is read again for a few
// seconds before the user is taken to be in the middle of a delete or create.
func (ui *userImport) takenUser(ctx context.Context, username string) (*client.User, error) {
	for wait := 100 * time.Millisecond; ; wait *= 2 {
		have, err := ui.t.GetUser(ctx, username)
		if !client.IsNotFound(err) || wait > 2*time.Second {
			return have, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// finish records a line's outcome and, unless it is a conflict, queues its memberships
// (also for an unchanged user: a run that stopped may have created it and not them; a
// member already there changes nothing).
func (ui *userImport) finish(ctx context.Context, l line[userRecord], o outcome) error {
	r := l.rec
	ui.sum.add(o)
	if o.status == "conflict" {
		return nil
	}
	for _, g := range r.Groups {
		ui.members.add(ctx, g, l.no, r.Username)
	}
	return nil
}

// compareUser decides about a line whose username the directory holds: the same user
// (unchanged) or another one (a conflict, never overwritten).
func compareUser(have client.User, r userRecord) (status, why string) {
	var diff []string
	if have.Email != r.Email {
		diff = append(diff, fmt.Sprintf("email %q", have.Email))
	}
	if have.FirstName != r.FirstName {
		diff = append(diff, fmt.Sprintf("first_name %q", have.FirstName))
	}
	if have.LastName != r.LastName {
		diff = append(diff, fmt.Sprintf("last_name %q", have.LastName))
	}
	if r.IsActive != nil && have.IsActive != *r.IsActive {
		diff = append(diff, fmt.Sprintf("is_active %v", have.IsActive))
	}
	if !sameAttrs(have.Attributes, r.Attributes) {
		diff = append(diff, "other attributes")
	}
	if len(diff) == 0 {
		return "unchanged", ""
	}
	return "conflict", "the directory already holds this username for a user with " + strings.Join(diff, ", ")
}

func sameAttrs(a, b map[string][]string) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

func reason(e *client.Error) string {
	switch e.Code {
	case client.CodeEmailTaken:
		return "the email is already used by another user"
	case client.CodeUsernameTaken:
		return "the username is already taken"
	case client.CodeIdempotencyKeyReused:
		return "this line changed since an earlier import sent it (Idempotency-Key reused); change it through users update"
	}
	msg := e.Code
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	for _, f := range e.Errors {
		msg += "; " + f.Field + ": " + f.Message
	}
	return msg
}

func importGroups(s *settings) *cobra.Command {
	var o importOptions
	var rb readBack
	cmd := &cobra.Command{
		Use:   "groups FILE",
		Short: "Import groups from a JSON Lines file (- for stdin), as export groups writes them",
		Long: `Import groups from a JSON Lines file (- for stdin): one object per line with name
(required), description and attributes — the format export groups writes. Lines are
checked first as for import users; a group already there with the same description and
attributes is unchanged, one with others is a conflict. With --wait (the default) it ends
once the query API shows every group it created.`,
		Example: `  ssodirctl export groups -t old > groups.jsonl && ssodirctl import groups -t new groups.jsonl`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.format == "csv" {
				return usagef("groups are imported from JSON Lines only")
			}
			if o.concurrency < 1 || o.concurrency > 256 {
				return usagef("--concurrency %d: want 1 to 256", o.concurrency)
			}
			t, p, err := s.tenantPrinter(cmd.Context())
			if err != nil {
				return err
			}
			in, err := openInput(s, args[0])
			if err != nil {
				return err
			}
			defer in.Close()
			lines, err := readJSONLines[groupRecord](in)
			if err != nil {
				return err
			}
			validateGroups(lines)
			sum := &summary{}
			if sum.Invalid = problemLines(s.io.err, lines); sum.Invalid > 0 && !o.skipInvalid {
				return usagef("%d of %d lines are invalid (listed above); nothing was written (--skip-invalid imports the others)", sum.Invalid, len(lines))
			}
			start := time.Now().UTC()
			existing := map[string]client.Group{}
			for g, err := range t.Groups(cmd.Context(), 500) {
				if err != nil {
					return err
				}
				existing[strings.ToLower(g.Name)] = g
			}
			sameGroup := func(have client.Group, r groupRecord) outcome {
				if have.Description == r.Description && sameAttrs(have.Attributes, r.Attributes) {
					return outcome{status: "unchanged"}
				}
				return outcome{status: "conflict", reason: "the directory already holds this group name with another description or attributes"}
			}
			var (
				createdMu sync.Mutex
				created   = map[string]int64{}
			)
			g, gctx := errgroup.WithContext(cmd.Context())
			g.SetLimit(o.concurrency)
			for _, l := range lines {
				if len(l.problems) > 0 {
					continue
				}
				g.Go(func() error {
					r := l.rec
					if have, ok := existing[strings.ToLower(r.Name)]; ok {
						o := sameGroup(have, r)
						o.line, o.name = l.no, r.Name
						sum.add(o)
						return nil
					}
					got, err := t.CreateGroup(gctx, client.NewGroup(r), client.IdempotencyKey(importKey("group-line", l.no, r)))
					o := outcome{line: l.no, name: r.Name, status: "created"}
					switch {
					case err == nil:
						if at, perr := time.Parse(time.RFC3339, got.CreatedAt); perr == nil && at.Before(start) {
							o.status = "unchanged"
						}
						createdMu.Lock()
						created[got.Name] = got.Version
						createdMu.Unlock()
					case client.HasCode(err, client.CodeGroupExists):
						have, err := t.GetGroup(gctx, r.Name)
						if err != nil {
							return err
						}
						same := sameGroup(*have, r)
						o.status, o.reason = same.status, same.reason
					default:
						e, perLine := lineError(err)
						if !perLine {
							return fmt.Errorf("line %d (%s): %w", l.no, r.Name, err)
						}
						o.status, o.reason = "conflict", reason(e)
					}
					sum.add(o)
					return nil
				})
			}
			if err := g.Wait(); err != nil {
				return fmt.Errorf("import stopped (run it again to resume; nothing is written twice): %w", err)
			}
			for name, v := range created {
				rb.group(cmd.Context(), s, t, name, v)
			}
			if err := sum.print(p, "groups"); err != nil {
				return err
			}
			return sum.result()
		},
	}
	o.add(cmd)
	rb.add(cmd)
	return cmd
}

func contextWithTimeout(cmd *cobra.Command, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), d)
}
