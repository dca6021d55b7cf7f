package keycloak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// ActionKind names what an action does; the values double as metric labels.
type ActionKind string

const (
	ActionCreateGroup ActionKind = "create_group"
	ActionUpdateGroup ActionKind = "update_group"
	ActionDeleteGroup ActionKind = "delete_group"
	ActionCreateUser  ActionKind = "create_user"
	ActionUpdateUser  ActionKind = "update_user"
	ActionDisableUser ActionKind = "disable_user"
	ActionDeleteUser  ActionKind = "delete_user"
	ActionJoin        ActionKind = "join"
	ActionLeave       ActionKind = "leave"
	// ActionSetPassword is never planned (a reconcile does not send passwords); it labels
	// the event-driven password operation in metrics.
	ActionSetPassword ActionKind = "set_password"
)

// phases is the order Apply runs actions in; the actions of one phase are independent and
// run in parallel. Deletes and renames come before creates so that a name freed in a run
// can be taken in the same run; joins come last as they need the ids of what was created.
var phases = []ActionKind{
	ActionDeleteGroup, ActionUpdateGroup, ActionCreateGroup,
	ActionDeleteUser, ActionDisableUser, ActionUpdateUser, ActionCreateUser,
	ActionLeave, ActionJoin,
}

func phaseOf(k ActionKind) int {
	for i, p := range phases {
		if p == k {
			return i
		}
	}
	return len(phases)
}

// Action is one change a plan makes in Keycloak.
type Action struct {
	Kind ActionKind
	// UserID and GroupID are the directory ids of the user and group concerned; a join
	// or leave has both.
	UserID  string
	GroupID string
	// Username and GroupName are for display.
	Username  string
	GroupName string
	// KeycloakUserID and KeycloakGroupID are the Keycloak ids known when planning; empty
	// for objects the plan itself creates (Apply fills them in as it goes).
	KeycloakUserID  string
	KeycloakGroupID string
	// Changes are the fields an update changes.
	Changes []Change
	// Groups are the names of the groups a created user is created in: a create carries
	// the user's memberships, which halves the requests of a first sync.
	Groups []string

	dirUser  *DirectoryUser
	dirGroup *DirectoryGroup
	groupIDs []string // directory ids of Groups
}

// Conflict is something a reconcile cannot fix on its own, such as a username held by a
// Keycloak user ssodir does not manage. Conflicts are reported, never overwritten.
type Conflict struct {
	// Kind is "user", "group" or "membership".
	Kind string
	// ID is the directory id concerned, Name its username or group name.
	ID     string
	Name   string
	Reason string
}

// Plan is the difference between the directory and a realm, as actions in the order they
// are applied.
type Plan struct {
	Realm     string
	OnDelete  OnDelete
	Actions   []Action
	Conflicts []Conflict
	// DirectoryUsers and DirectoryGroups count the directory side; ManagedUsers and
	// ManagedGroups the Keycloak objects that carry ssodir_id.
	DirectoryUsers, DirectoryGroups int
	ManagedUsers, ManagedGroups     int
	// Refused is set (matching ErrSafetyValve) when the plan removes more than the safety
	// valve allows; Apply refuses such a plan.
	Refused error

	preserve []string
	managed  map[string]*Group // managed Keycloak groups by directory id, as read
}

// Empty reports whether the plan changes nothing.
func (p *Plan) Empty() bool { return len(p.Actions) == 0 }

// Count is the number of actions of the kind.
func (p *Plan) Count(kind ActionKind) int {
	n := 0
	for _, a := range p.Actions {
		if a.Kind == kind {
			n++
		}
	}
	return n
}

// SafetyValve bounds how much of a realm one reconcile may remove, against a directory
// read that came back empty or truncated: a plan that deletes (or, with on_delete=disable,
// disables) more than MaxShare of the realm's managed users, or deletes more than MaxShare
// of its managed groups, is refused — unless it removes no more than Floor, so that small
// realms can still lose a user or two.
type SafetyValve struct {
	MaxShare float64
	Floor    int
}

// DefaultSafetyValve refuses to remove more than a fifth of a realm, beyond five objects.
var DefaultSafetyValve = SafetyValve{MaxShare: 0.2, Floor: 5}

func (v SafetyValve) trips(removed, managed int) bool {
	return removed > v.Floor && float64(removed) > v.MaxShare*float64(managed)
}

// PlanOptions shape a reconcile.
type PlanOptions struct {
	// OnDelete is the tenant's on_delete setting; empty means delete.
	OnDelete OnDelete
	// Valve is the safety valve; nil means DefaultSafetyValve. MaxShare 1 turns it off.
	Valve *SafetyValve
	// PageSize is the page size for reading Keycloak (500).
	PageSize int
	// PreserveAttributes are user attributes kept from Keycloak rather than taken from
	// the directory; nil means DefaultPreservedAttributes.
	PreserveAttributes []string
}

// NewPlan reads the whole directory and the whole realm (paging through users, top-level
// groups and the members of managed groups) and works out what to change. It only reads:
// printing the plan is a dry run. Users and groups are matched on ssodir_id; objects
// without it are never changed, and a name or email they hold is reported as a Conflict.
//
// When the safety valve trips, NewPlan returns the plan (to show what it would have
// done) together with an error matching ErrSafetyValve; Apply refuses that plan.
func NewPlan(ctx context.Context, dir Directory, c *Client, opts PlanOptions) (*Plan, error) {
	onDelete, err := ParseOnDelete(string(opts.OnDelete))
	if err != nil {
		return nil, err
	}
	valve := DefaultSafetyValve
	if opts.Valve != nil {
		valve = *opts.Valve
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 500
	}
	preserve := opts.PreserveAttributes
	if preserve == nil {
		preserve = DefaultPreservedAttributes
	}
	b := &planner{
		c: c, pageSize: opts.PageSize, onDelete: onDelete,
		plan:          &Plan{Realm: c.Realm(), OnDelete: onDelete, preserve: preserve},
		dirGroups:     map[string]*DirectoryGroup{},
		dirUsers:      map[string]*DirectoryUser{},
		kcGroups:      map[string]*Group{},
		kcGroupByName: map[string]*Group{},
		blockedGroups: map[string]bool{},
		groupCreates:  map[string]bool{},
		groupDeletes:  map[string]bool{},
		kcUsers:       map[string]*User{},
		kcByUsername:  map[string]*User{},
		kcByEmail:     map[string]*User{},
		blockedUsers:  map[string]bool{},
		memberOf:      map[string][]string{},
	}
	if err := b.readDirectory(ctx, dir); err != nil {
		return nil, err
	}
	if err := b.readKeycloak(ctx); err != nil {
		return nil, err
	}
	b.planGroups()
	b.planUsers()

	p := b.plan
	p.managed = b.kcGroups
	sort.SliceStable(p.Actions, func(i, j int) bool {
		a, b := &p.Actions[i], &p.Actions[j]
		if pa, pb := phaseOf(a.Kind), phaseOf(b.Kind); pa != pb {
			return pa < pb
		}
		if a.Username != b.Username {
			return a.Username < b.Username
		}
		return a.GroupName < b.GroupName
	})
	counts := map[ActionKind]int{}
	for _, a := range p.Actions {
		counts[a.Kind]++
	}
	for k, n := range counts {
		c.metrics.driftFound(string(k), n)
	}
	c.metrics.driftFound("conflict", len(p.Conflicts))

	removedUsers := counts[ActionDeleteUser] + counts[ActionDisableUser]
	var refusals []string
	if valve.trips(removedUsers, p.ManagedUsers) {
		refusals = append(refusals, fmt.Sprintf("it would remove %d of the realm's %d managed users", removedUsers, p.ManagedUsers))
	}
	if valve.trips(counts[ActionDeleteGroup], p.ManagedGroups) {
		refusals = append(refusals, fmt.Sprintf("it would delete %d of the realm's %d managed groups", counts[ActionDeleteGroup], p.ManagedGroups))
	}
	if len(refusals) > 0 {
		p.Refused = fmt.Errorf("%w: %s, more than %.0f%% (and more than %d); check the directory, or raise the valve for this run",
			ErrSafetyValve, strings.Join(refusals, " and "), valve.MaxShare*100, valve.Floor)
		return p, p.Refused
	}
	return p, nil
}

type planner struct {
	c        *Client
	pageSize int
	onDelete OnDelete
	plan     *Plan

	dirGroups     map[string]*DirectoryGroup
	dirGroupOrder []*DirectoryGroup
	dirUsers      map[string]*DirectoryUser
	dirUserOrder  []*DirectoryUser

	kcGroups      map[string]*Group // managed, by ssodir_id
	kcGroupByName map[string]*Group // all top-level groups, by exact name
	blockedGroups map[string]bool   // ssodir_ids carried by more than one group
	groupCreates  map[string]bool
	groupDeletes  map[string]bool

	kcUsers      map[string]*User // managed, by ssodir_id
	kcByUsername map[string]*User // all users, by lower-cased username
	kcByEmail    map[string]*User // all users, by lower-cased email
	blockedUsers map[string]bool  // ssodir_ids carried by more than one user
	memberOf     map[string][]string
}

func (b *planner) readDirectory(ctx context.Context, dir Directory) error {
	names := map[string]bool{}
	for g, err := range dir.Groups(ctx) {
		if err != nil {
			return fmt.Errorf("keycloak reconcile: read directory groups: %w", err)
		}
		if err := checkID("group", g.ID); err != nil {
			return err
		}
		key := strings.ToLower(g.Name)
		if g.Name == "" || b.dirGroups[g.ID] != nil || names[key] {
			return fmt.Errorf("keycloak reconcile: directory group %s (%q) is empty, or its id or name is repeated", g.ID, g.Name)
		}
		names[key] = true
		gc := g
		b.dirGroups[g.ID] = &gc
		b.dirGroupOrder = append(b.dirGroupOrder, &gc)
	}
	usernames, emails := map[string]bool{}, map[string]bool{}
	for u, err := range dir.Users(ctx) {
		if err != nil {
			return fmt.Errorf("keycloak reconcile: read directory users: %w", err)
		}
		if err := checkID("user", u.ID); err != nil {
			return err
		}
		un, em := strings.ToLower(u.Username), strings.ToLower(u.Email)
		if un == "" || b.dirUsers[u.ID] != nil || usernames[un] || (em != "" && emails[em]) {
			return fmt.Errorf("keycloak reconcile: directory user %s (%q) has no username, or its id, username or email is repeated", u.ID, u.Username)
		}
		usernames[un] = true
		if em != "" {
			emails[em] = true
		}
		uc := u
		b.dirUsers[u.ID] = &uc
		b.dirUserOrder = append(b.dirUserOrder, &uc)
	}
	sort.Slice(b.dirGroupOrder, func(i, j int) bool { return b.dirGroupOrder[i].Name < b.dirGroupOrder[j].Name })
	sort.Slice(b.dirUserOrder, func(i, j int) bool {
		return strings.ToLower(b.dirUserOrder[i].Username) < strings.ToLower(b.dirUserOrder[j].Username)
	})
	b.plan.DirectoryGroups, b.plan.DirectoryUsers = len(b.dirGroups), len(b.dirUsers)
	return nil
}

func (b *planner) readKeycloak(ctx context.Context) error {
	seen := map[string]bool{}
	for g, err := range b.c.AllGroups(ctx, b.pageSize) {
		if err != nil {
			return fmt.Errorf("keycloak reconcile: read groups: %w", err)
		}
		if seen[g.ID] {
			continue // offset paging over a changing realm can repeat an object
		}
		seen[g.ID] = true
		gp := &g
		b.kcGroupByName[g.Name] = gp
		id := g.SsodirID()
		if id == "" {
			continue
		}
		b.plan.ManagedGroups++
		if other, dup := b.kcGroups[id]; dup {
			b.blockedGroups[id] = true
			b.conflict("group", id, g.Name, fmt.Sprintf("Keycloak groups %s (%s) and %s (%s) both carry ssodir_id %s; both are left alone until one is removed",
				other.ID, other.Name, g.ID, g.Name, id))
			continue
		}
		b.kcGroups[id] = gp
	}

	clear(seen)
	for u, err := range b.c.AllUsers(ctx, UserQuery{}, b.pageSize) {
		if err != nil {
			return fmt.Errorf("keycloak reconcile: read users: %w", err)
		}
		if seen[u.ID] {
			continue
		}
		seen[u.ID] = true
		up := &u
		b.kcByUsername[strings.ToLower(u.Username)] = up
		if u.Email != "" {
			b.kcByEmail[strings.ToLower(u.Email)] = up
		}
		id := u.SsodirID()
		if id == "" {
			continue
		}
		b.plan.ManagedUsers++
		if other, dup := b.kcUsers[id]; dup {
			b.blockedUsers[id] = true
			b.conflict("user", id, u.Username, fmt.Sprintf("Keycloak users %s (%s) and %s (%s) both carry ssodir_id %s; both are left alone until one is removed",
				other.ID, other.Username, u.ID, u.Username, id))
			continue
		}
		b.kcUsers[id] = up
	}

	// Memberships are read per managed group (one paged list each) rather than per user:
	// a realm has far fewer groups than users.
	var groups []*Group
	for id, g := range b.kcGroups {
		if !b.blockedGroups[id] {
			groups = append(groups, g)
		}
	}
	var mu sync.Mutex
	return parallel(ctx, b.c.cfg.Concurrency, len(groups), true, func(ctx context.Context, i int) error {
		g := groups[i]
		var ids []string
		for m, err := range b.c.AllGroupMembers(ctx, g.ID, b.pageSize) {
			if err != nil {
				return fmt.Errorf("keycloak reconcile: read members of group %s: %w", g.Name, err)
			}
			ids = append(ids, m.ID)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, uid := range ids {
			b.memberOf[uid] = append(b.memberOf[uid], g.SsodirID())
		}
		return nil
	})
}

func (b *planner) conflict(kind, id, name, reason string) {
	b.plan.Conflicts = append(b.plan.Conflicts, Conflict{Kind: kind, ID: id, Name: name, Reason: reason})
}

func (b *planner) add(a Action) { b.plan.Actions = append(b.plan.Actions, a) }

// groupNameFreed reports whether the group holding a name gives it up in this run: a
// managed group is either deleted or renamed to its own directory name (directory names
// are unique).
func (b *planner) groupNameFreed(h *Group) bool {
	id := h.SsodirID()
	return id != "" && !b.blockedGroups[id]
}

func (b *planner) planGroups() {
	for _, dg := range b.dirGroupOrder {
		if b.blockedGroups[dg.ID] {
			continue
		}
		if kg := b.kcGroups[dg.ID]; kg != nil {
			want := desiredGroup(*dg, kg)
			changes := diffGroup(*kg, want)
			if len(changes) == 0 {
				continue
			}
			if h := b.kcGroupByName[want.Name]; h != nil && h != kg && !b.groupNameFreed(h) {
				b.conflict("group", dg.ID, dg.Name, fmt.Sprintf("cannot rename Keycloak group %q: the name is held by group %s, which ssodir does not manage", kg.Name, h.ID))
				continue
			}
			b.add(Action{Kind: ActionUpdateGroup, GroupID: dg.ID, GroupName: dg.Name, KeycloakGroupID: kg.ID, Changes: changes, dirGroup: dg})
			continue
		}
		if h := b.kcGroupByName[dg.Name]; h != nil && !b.groupNameFreed(h) {
			b.conflict("group", dg.ID, dg.Name, fmt.Sprintf("the name is held by Keycloak group %s, which ssodir does not manage", h.ID))
			continue
		}
		b.groupCreates[dg.ID] = true
		b.add(Action{Kind: ActionCreateGroup, GroupID: dg.ID, GroupName: dg.Name, dirGroup: dg})
	}
	for id, kg := range b.kcGroups {
		if b.dirGroups[id] == nil && !b.blockedGroups[id] {
			b.groupDeletes[id] = true
			b.add(Action{Kind: ActionDeleteGroup, GroupID: id, GroupName: kg.Name, KeycloakGroupID: kg.ID})
		}
	}
}

// holderOf describes who keeps a username or email that want needs, or returns "" when
// nobody does by the time creates and updates run. A managed holder gives it up (it is
// deleted, or updated to its own, different directory values), except a deleted user's
// account that on_delete=disable keeps.
func (b *planner) holderOf(self *User, h *User, what string) string {
	if h == nil || h == self {
		return ""
	}
	id := h.SsodirID()
	switch {
	case id == "":
		return fmt.Sprintf("%s is held by Keycloak user %s (%s), which ssodir does not manage", what, h.ID, h.Username)
	case b.blockedUsers[id]:
		return fmt.Sprintf("%s is held by Keycloak user %s, whose ssodir_id %s is duplicated", what, h.ID, id)
	case b.dirUsers[id] == nil && b.onDelete == OnDeleteDisable:
		return fmt.Sprintf("%s is held by Keycloak user %s, kept disabled after its directory user %s was deleted (on_delete=disable)", what, h.ID, id)
	}
	return ""
}

func (b *planner) taken(self *User, want User) string {
	if r := b.holderOf(self, b.kcByUsername[want.Username], fmt.Sprintf("username %q", want.Username)); r != "" {
		return r
	}
	if want.Email != "" {
		return b.holderOf(self, b.kcByEmail[want.Email], fmt.Sprintf("email %q", want.Email))
	}
	return ""
}

// groupUsable reports whether a directory group exists in Keycloak by the time joins run.
func (b *planner) groupUsable(id string) bool {
	return !b.blockedGroups[id] && (b.kcGroups[id] != nil || b.groupCreates[id])
}

func (b *planner) groupName(id string) string {
	if g := b.dirGroups[id]; g != nil {
		return g.Name
	}
	if g := b.kcGroups[id]; g != nil {
		return g.Name
	}
	return id
}

func (b *planner) kcGroupID(id string) string {
	if g := b.kcGroups[id]; g != nil {
		return g.ID
	}
	return ""
}

func (b *planner) planUsers() {
	for _, du := range b.dirUserOrder {
		if b.blockedUsers[du.ID] {
			continue
		}
		username := strings.ToLower(du.Username)
		wantGroups := map[string]bool{}
		for _, gid := range du.Groups {
			switch {
			case b.dirGroups[gid] == nil:
				b.conflict("membership", du.ID, username, fmt.Sprintf("member of group %s, which is not in the directory", gid))
			case b.groupUsable(gid):
				wantGroups[gid] = true
			}
		}
		ku := b.kcUsers[du.ID]
		if ku == nil {
			want := desiredUser(*du, nil, b.plan.preserve)
			if reason := b.taken(nil, want); reason != "" {
				b.conflict("user", du.ID, username, reason)
				continue
			}
			act := Action{Kind: ActionCreateUser, UserID: du.ID, Username: username, dirUser: du}
			for gid := range wantGroups {
				act.groupIDs = append(act.groupIDs, gid)
			}
			sort.Slice(act.groupIDs, func(i, j int) bool { return b.groupName(act.groupIDs[i]) < b.groupName(act.groupIDs[j]) })
			for _, gid := range act.groupIDs {
				act.Groups = append(act.Groups, b.groupName(gid))
			}
			b.add(act)
			continue
		}
		want := desiredUser(*du, ku, b.plan.preserve)
		if changes := diffUser(*ku, want); len(changes) > 0 {
			if reason := b.taken(ku, want); reason != "" {
				b.conflict("user", du.ID, username, reason)
			} else {
				b.add(Action{Kind: ActionUpdateUser, UserID: du.ID, Username: username, KeycloakUserID: ku.ID, Changes: changes, dirUser: du})
			}
		}
		have := map[string]bool{}
		for _, gid := range b.memberOf[ku.ID] {
			have[gid] = true
		}
		for gid := range wantGroups {
			if !have[gid] {
				b.add(Action{Kind: ActionJoin, UserID: du.ID, Username: username, KeycloakUserID: ku.ID,
					GroupID: gid, GroupName: b.groupName(gid), KeycloakGroupID: b.kcGroupID(gid)})
			}
		}
		for gid := range have {
			// A group deleted in this run takes its memberships with it.
			if !wantGroups[gid] && !b.groupDeletes[gid] && !b.blockedGroups[gid] {
				b.add(Action{Kind: ActionLeave, UserID: du.ID, Username: username, KeycloakUserID: ku.ID,
					GroupID: gid, GroupName: b.groupName(gid), KeycloakGroupID: b.kcGroupID(gid)})
			}
		}
	}
	for id, ku := range b.kcUsers {
		if b.dirUsers[id] != nil || b.blockedUsers[id] {
			continue
		}
		switch {
		case b.onDelete == OnDeleteDelete:
			b.add(Action{Kind: ActionDeleteUser, UserID: id, Username: ku.Username, KeycloakUserID: ku.ID})
		case ku.Enabled:
			b.add(Action{Kind: ActionDisableUser, UserID: id, Username: ku.Username, KeycloakUserID: ku.ID,
				Changes: []Change{{"enabled", "true", "false"}}})
		}
	}
}

// String is the plan as a readable diff; see WriteTo.
func (p *Plan) String() string {
	var sb strings.Builder
	_, _ = p.WriteTo(&sb)
	return sb.String()
}

// WriteTo writes the plan as a readable diff: a summary line, one line per action in the
// order Apply runs them, then the conflicts:
//
//	Keycloak realm "acme": 1 delete_user, 1 update_user, 1 create_user, 1 leave, 1 join; 1 conflict(s)
//	- delete user old
//	~ update user jdoe: email jdoe@a.example→jdoe@b.example
//	+ create user jane in admins, staff
//	< leave jdoe staff
//	> join jdoe admins
//	! conflict user bob: username "bob" is held by Keycloak user … which ssodir does not manage
func (p *Plan) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	header := fmt.Sprintf("Keycloak realm %q: ", p.Realm)
	switch {
	case p.Empty() && len(p.Conflicts) == 0:
		header += "in step, nothing to change"
	default:
		var parts []string
		for _, k := range phases {
			if n := p.Count(k); n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, k))
			}
		}
		if len(parts) == 0 {
			parts = []string{"nothing to change"}
		}
		header += strings.Join(parts, ", ")
		if n := len(p.Conflicts); n > 0 {
			header += fmt.Sprintf("; %d conflict(s)", n)
		}
	}
	fmt.Fprintln(cw, header)
	if p.Refused != nil {
		fmt.Fprintf(cw, "REFUSED: %v\n", p.Refused)
	}
	for _, a := range p.Actions {
		fmt.Fprintln(cw, a.String())
	}
	for _, c := range p.Conflicts {
		fmt.Fprintf(cw, "! conflict %s %s: %s\n", c.Kind, c.Name, c.Reason)
	}
	return cw.n, cw.err
}

// String is the action as one line of a plan.
func (a Action) String() string {
	switch a.Kind {
	case ActionCreateGroup:
		return "+ create group " + a.GroupName
	case ActionUpdateGroup:
		return "~ update group " + a.GroupName + ": " + formatChanges(a.Changes)
	case ActionDeleteGroup:
		return "- delete group " + a.GroupName
	case ActionCreateUser:
		if len(a.Groups) > 0 {
			return "+ create user " + a.Username + " in " + strings.Join(a.Groups, ", ")
		}
		return "+ create user " + a.Username
	case ActionUpdateUser:
		return "~ update user " + a.Username + ": " + formatChanges(a.Changes)
	case ActionDisableUser:
		return "- disable user " + a.Username
	case ActionDeleteUser:
		return "- delete user " + a.Username
	case ActionJoin:
		return "> join " + a.Username + " " + a.GroupName
	case ActionLeave:
		return "< leave " + a.Username + " " + a.GroupName
	}
	return fmt.Sprintf("? %s %s %s", a.Kind, a.Username, a.GroupName)
}

func formatChanges(ch []Change) string {
	parts := make([]string, len(ch))
	for i, c := range ch {
		parts[i] = c.Field + " " + displayValue(c.Old) + "→" + displayValue(c.New)
	}
	return strings.Join(parts, ", ")
}

func displayValue(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\n\"→,") && !strings.HasPrefix(s, "[") {
		return strconv.Quote(s)
	}
	return s
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(b []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
	return n, err
}

// parallel runs fn for 0..n-1 on up to workers goroutines. With stopOnError the first
// error cancels the rest and is returned; without, every index runs and the errors are
// joined.
func parallel(ctx context.Context, workers, n int, stopOnError bool, fn func(context.Context, int) error) error {
	if workers < 1 {
		workers = 1
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(ctx, i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					if stopOnError {
						cancel()
					}
				}
			}
		}()
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if stopOnError && len(errs) > 0 {
		return errs[0]
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}
