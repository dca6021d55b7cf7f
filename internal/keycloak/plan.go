package keycloak

import (
	"context"
	"fmt"
	"sort"
	"strings"
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
	// Version is the directory version the action writes (the version of the directory
	// read it was planned from; Apply writes the write model's version at the time it acts,
	// which is never older). Found is the ssodir_version Keycloak held when it was read, 0
	// for objects it did not have or that carry none.
	Version int64
	Found   int64
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

// NewPlan reads the whole realm, then the whole directory, and works out what to change
// (Diff). It only reads: printing the plan is a dry run. The realm is read first so that
// the directory read is the newer of the two: whatever the event path wrote into the realm
// before the reconcile began is in the directory read as well, unless the read model
// lags; Apply re-checks every action against the write model for that case.
//
// When the safety valve trips, NewPlan returns the plan (to show what it would have
// done) together with an error matching ErrSafetyValve; Apply refuses that plan.
func NewPlan(ctx context.Context, dir Directory, c *Client, opts PlanOptions) (*Plan, error) {
	if _, err := ParseOnDelete(string(opts.OnDelete)); err != nil {
		return nil, err
	}
	realm, err := ReadRealm(ctx, c, opts.PageSize)
	if err != nil {
		return nil, err
	}
	d, err := ReadDirectory(ctx, dir)
	if err != nil {
		return nil, err
	}
	p, err := Diff(realm, d, opts)
	if p != nil {
		c.metrics.planned(p)
	}
	return p, err
}

// Diff is the plan that brings the realm in step with the directory: a pure function of
// the two snapshots. Users and groups are matched on ssodir_id; objects without it are
// never changed, and a name or email they hold is reported as a Conflict.
//
// Never older over newer: an object whose ssodir_version is newer than the directory's
// version of it (the read model lags behind the event path) is left as it is, and every
// action carries the directory version it writes (Action.Version) and the one Keycloak
// held (Action.Found).
func Diff(realm *RealmSnapshot, dir *DirectorySnapshot, opts PlanOptions) (*Plan, error) {
	onDelete, err := ParseOnDelete(string(opts.OnDelete))
	if err != nil {
		return nil, err
	}
	valve := DefaultSafetyValve
	if opts.Valve != nil {
		valve = *opts.Valve
	}
	preserve := opts.PreserveAttributes
	if preserve == nil {
		preserve = DefaultPreservedAttributes
	}
	b := &planner{
		onDelete:      onDelete,
		plan:          &Plan{Realm: realm.Realm, OnDelete: onDelete, preserve: preserve},
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
	b.indexDirectory(dir)
	b.indexRealm(realm)
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
	removedUsers := p.Count(ActionDeleteUser) + p.Count(ActionDisableUser)
	var refusals []string
	if valve.trips(removedUsers, p.ManagedUsers) {
		refusals = append(refusals, fmt.Sprintf("it would remove %d of the realm's %d managed users", removedUsers, p.ManagedUsers))
	}
	if n := p.Count(ActionDeleteGroup); valve.trips(n, p.ManagedGroups) {
		refusals = append(refusals, fmt.Sprintf("it would delete %d of the realm's %d managed groups", n, p.ManagedGroups))
	}
	if len(refusals) > 0 {
		p.Refused = fmt.Errorf("%w: %s, more than %.0f%% (and more than %d); check the directory, or raise the valve for this run",
			ErrSafetyValve, strings.Join(refusals, " and "), valve.MaxShare*100, valve.Floor)
		return p, p.Refused
	}
	return p, nil
}

type planner struct {
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

func (b *planner) indexDirectory(dir *DirectorySnapshot) {
	for i := range dir.Groups {
		g := &dir.Groups[i]
		b.dirGroups[g.ID] = g
		b.dirGroupOrder = append(b.dirGroupOrder, g)
	}
	for i := range dir.Users {
		u := &dir.Users[i]
		b.dirUsers[u.ID] = u
		b.dirUserOrder = append(b.dirUserOrder, u)
	}
	b.plan.DirectoryGroups, b.plan.DirectoryUsers = len(b.dirGroups), len(b.dirUsers)
}

func (b *planner) indexRealm(realm *RealmSnapshot) {
	for i := range realm.Groups {
		g := &realm.Groups[i]
		b.kcGroupByName[g.Name] = g
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
		b.kcGroups[id] = g
	}
	for i := range realm.Users {
		u := &realm.Users[i]
		b.kcByUsername[strings.ToLower(u.Username)] = u
		if u.Email != "" {
			b.kcByEmail[strings.ToLower(u.Email)] = u
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
		b.kcUsers[id] = u
	}
	for id, g := range b.kcGroups {
		if b.blockedGroups[id] {
			continue
		}
		for _, uid := range realm.Members[g.ID] {
			b.memberOf[uid] = append(b.memberOf[uid], id)
		}
	}
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
			if kg.SsodirVersion() > dg.Version {
				continue // Keycloak is newer than this directory read: the read model lags
			}
			want := desiredGroup(*dg, kg)
			changes := diffGroup(*kg, want)
			// A membership change raises the group's version without changing the group,
			// and the event path only adds or removes the member: an older ssodir_version
			// alone is not drift (it only makes the version guard more permissive).
			if len(changes) == 0 || len(changes) == 1 && changes[0].Field == "attributes."+AttrSsodirVersion {
				continue
			}
			if h := b.kcGroupByName[want.Name]; h != nil && h != kg && !b.groupNameFreed(h) {
				b.conflict("group", dg.ID, dg.Name, fmt.Sprintf("cannot rename Keycloak group %q: the name is held by group %s, which ssodir does not manage", kg.Name, h.ID))
				continue
			}
			b.add(Action{Kind: ActionUpdateGroup, GroupID: dg.ID, GroupName: dg.Name, KeycloakGroupID: kg.ID,
				Version: dg.Version, Found: kg.SsodirVersion(), Changes: changes, dirGroup: dg})
			continue
		}
		if h := b.kcGroupByName[dg.Name]; h != nil && !b.groupNameFreed(h) {
			b.conflict("group", dg.ID, dg.Name, fmt.Sprintf("the name is held by Keycloak group %s, which ssodir does not manage", h.ID))
			continue
		}
		b.groupCreates[dg.ID] = true
		b.add(Action{Kind: ActionCreateGroup, GroupID: dg.ID, GroupName: dg.Name, Version: dg.Version, dirGroup: dg})
	}
	for id, kg := range b.kcGroups {
		if b.dirGroups[id] == nil && !b.blockedGroups[id] {
			b.groupDeletes[id] = true
			b.add(Action{Kind: ActionDeleteGroup, GroupID: id, GroupName: kg.Name, KeycloakGroupID: kg.ID, Found: kg.SsodirVersion()})
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
			act := Action{Kind: ActionCreateUser, UserID: du.ID, Username: username, Version: du.Version, dirUser: du}
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
		// A user Keycloak holds at a newer version than this directory read (the read
		// model lags) is left as it is, memberships included: they may be as new.
		if ku.SsodirVersion() > du.Version {
			continue
		}
		want := desiredUser(*du, ku, b.plan.preserve)
		if changes := diffUser(*ku, want); len(changes) > 0 {
			if reason := b.taken(ku, want); reason != "" {
				b.conflict("user", du.ID, username, reason)
			} else {
				b.add(Action{Kind: ActionUpdateUser, UserID: du.ID, Username: username, KeycloakUserID: ku.ID,
					Version: du.Version, Found: ku.SsodirVersion(), Changes: changes, dirUser: du})
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
			b.add(Action{Kind: ActionDeleteUser, UserID: id, Username: ku.Username, KeycloakUserID: ku.ID, Found: ku.SsodirVersion()})
		case ku.Enabled:
			b.add(Action{Kind: ActionDisableUser, UserID: id, Username: ku.Username, KeycloakUserID: ku.ID, Found: ku.SsodirVersion(),
				Changes: []Change{{"enabled", "true", "false"}}})
		}
	}
}
