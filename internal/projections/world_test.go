package projections_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
)

// world is a small model of the write side: it decides commands the way the command API
// does (versions continue after a delete, membership revisions per username, full state in
// every payload) and records the events it would append. Tests project its log. Emails
// pass through as given (the command API lower-cases them) so that tests see the
// projection lower-case its index key on its own.
type world struct {
	t     testing.TB
	reg   *events.Registry
	clock time.Time
	seq   int
	// offset moves every later event by this much (later), e.g. onto another day.
	offset time.Duration
	actor  string
	users  map[string]*userModel
	groups map[string]*groupModel
	// memRev is each username's membership revision, bumped by every add and delete; it
	// survives a delete, like the write side's `user#<u>/memberships` item.
	memRev map[string]int64
	// bulk marks the memberships (group key, username) a members change made: a delete
	// of their user may not know them (the write side writes their items after the
	// change is recorded), so deleteUser leaves them out of its groups, the worst case.
	bulk map[[2]string]bool
	log  []events.Envelope
}

type userModel struct {
	state       events.User
	exists      bool
	incarnation int
}

type groupModel struct {
	state       events.Group
	exists      bool
	incarnation int
	// members maps a username to the group version of its add.
	members map[string]int64
}

// t0 is the world's epoch; event n happens n minutes later, so tests can spell out times.
var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// at is the stored time of the n-th event (1-based) of a world never moved by later.
func at(n int) string { return dynamo.FormatTime(t0.Add(time.Duration(n) * time.Minute)) }

func newWorld(t testing.TB) *world {
	return &world{
		t: t, reg: events.NewRegistry(), clock: t0, actor: "admin-1",
		users: map[string]*userModel{}, groups: map[string]*groupModel{}, memRev: map[string]int64{},
		bulk: map[[2]string]bool{},
	}
}

// record appends the event as the command store would, and returns it as the projector
// gets it: encoded into a `config#<version>` record and decoded again.
func (w *world) record(kind events.AggregateKind, key string, version int64, p events.Payload, changes map[string]events.Change) events.Envelope {
	w.t.Helper()
	e := events.Envelope{
		EventID: fmt.Sprintf("ev%04d", w.seq), Type: p.EventType(), SchemaVersion: events.SchemaVersion,
		Kind: kind, Key: key, Version: version, Actor: w.actor,
		CommandID: fmt.Sprintf("cmd%04d", w.seq), CorrelationID: fmt.Sprintf("corr%04d", w.seq),
		OccurredAt: w.clock, Changes: changes, Payload: p,
	}
	item, err := dynamo.EncodeRecord(e, w.clock, 0)
	if err != nil {
		w.t.Fatalf("encode %s: %v", e.Type, err)
	}
	back, err := dynamo.DecodeRecord(w.reg, item)
	if err != nil {
		w.t.Fatalf("decode %s: %v", e.Type, err)
	}
	w.log = append(w.log, back)
	return back
}

func (w *world) tick() time.Time {
	w.seq++
	w.clock = t0.Add(w.offset + time.Duration(w.seq)*time.Minute)
	return w.clock
}

// later moves the clock of every following event forward by d.
func (w *world) later(d time.Duration) { w.offset += d }

func (w *world) user(name string) *userModel {
	u, ok := w.users[name]
	if !ok {
		u = &userModel{}
		w.users[name] = u
	}
	return u
}

func (w *world) group(key string) *groupModel {
	g, ok := w.groups[key]
	if !ok {
		g = &groupModel{members: map[string]int64{}}
		w.groups[key] = g
	}
	return g
}

func (w *world) createUser(name, email, first, last string) events.Envelope {
	u := w.user(name)
	if u.exists {
		panic("world: user exists: " + name)
	}
	now := w.tick()
	u.incarnation++
	u.exists = true
	u.state = events.User{
		ID: fmt.Sprintf("%s-id%d", name, u.incarnation), Username: name, Email: email,
		FirstName: first, LastName: last, IsActive: true, Attributes: map[string][]string{"dept": {"eng"}},
		Version: u.state.Version + 1, CreatedAt: now, UpdatedAt: now,
		DeletedMembershipRev: u.state.DeletedMembershipRev,
	}
	return w.record(events.KindUser, name, u.state.Version, &events.UserCreated{
		User: u.state, PasswordCiphertext: "SECRET-ciphertext-" + name,
	}, userChanges(events.User{}, u.state))
}

func (w *world) updateUser(name string, f func(*events.User)) events.Envelope {
	u := w.live(name)
	old := u.state
	f(&u.state)
	u.state.Version++
	u.state.UpdatedAt = w.tick()
	return w.record(events.KindUser, name, u.state.Version, &events.UserUpdated{User: u.state}, userChanges(old, u.state))
}

// changePassword also puts a password into the change set, as a buggy write side might:
// the projection must drop it.
func (w *world) changePassword(name string) events.Envelope {
	u := w.live(name)
	u.state.Version++
	u.state.UpdatedAt = w.tick()
	return w.record(events.KindUser, name, u.state.Version, &events.UserPasswordChanged{
		User: u.state, PasswordCiphertext: "SECRET-ciphertext-2-" + name,
	}, map[string]events.Change{"password": {Old: "SECRET-old", New: "SECRET-new"}})
}

func (w *world) setActive(name string, active bool) events.Envelope {
	u := w.live(name)
	if u.state.IsActive == active {
		panic("world: no change")
	}
	old := u.state
	u.state.IsActive = active
	u.state.Version++
	u.state.UpdatedAt = w.tick()
	ch := userChanges(old, u.state)
	if active {
		return w.record(events.KindUser, name, u.state.Version, &events.UserActivated{User: u.state}, ch)
	}
	return w.record(events.KindUser, name, u.state.Version, &events.UserDeactivated{User: u.state}, ch)
}

func (w *world) deleteUser(name string) events.Envelope {
	u := w.live(name)
	var groups []string
	for _, key := range slices.Sorted(maps.Keys(w.groups)) {
		if g := w.groups[key]; g.exists {
			if _, ok := g.members[name]; ok {
				if !w.bulk[[2]string{key, name}] {
					groups = append(groups, key)
				}
				delete(g.members, name)
			}
		}
	}
	prev := u.state
	u.exists = false
	w.memRev[name]++
	u.state = events.User{
		Username: name, Version: prev.Version + 1, CreatedAt: prev.CreatedAt, UpdatedAt: w.tick(),
		Deleted: true, DeletedMembershipRev: w.memRev[name],
	}
	return w.record(events.KindUser, name, u.state.Version, &events.UserDeleted{User: u.state, PreviousID: prev.ID, Groups: groups},
		map[string]events.Change{"deleted": {Old: false, New: true}})
}

func (w *world) createGroup(name, description string) events.Envelope {
	key := strings.ToLower(name)
	g := w.group(key)
	if g.exists {
		panic("world: group exists: " + key)
	}
	now := w.tick()
	g.incarnation++
	g.exists = true
	g.state = events.Group{
		ID: fmt.Sprintf("%s-id%d", key, g.incarnation), Key: key, Name: name, Description: description,
		Version: g.state.Version + 1, CreatedAt: now, UpdatedAt: now, LastDeletedVersion: g.state.LastDeletedVersion,
	}
	return w.record(events.KindGroup, key, g.state.Version, &events.GroupCreated{Group: g.state},
		map[string]events.Change{"name": {New: name}, "description": {New: description}})
}

func (w *world) updateGroup(key, description string) events.Envelope {
	g := w.liveGroup(key)
	old := g.state.Description
	g.state.Description = description
	g.state.Attributes = map[string][]string{"tier": {description}}
	g.state.Version++
	g.state.UpdatedAt = w.tick()
	return w.record(events.KindGroup, key, g.state.Version, &events.GroupUpdated{Group: g.state},
		map[string]events.Change{"description": {Old: old, New: description}})
}

func (w *world) deleteGroup(key string) events.Envelope {
	g := w.liveGroup(key)
	prev := g.state
	// The record lists the members it removes, as the command side decides them: the
	// memberships of users live now (a user delete before it took theirs).
	var members []events.Member
	for _, name := range slices.Sorted(maps.Keys(g.members)) {
		members = append(members, events.Member{Username: name, UserID: w.users[name].state.ID, MembershipRev: w.memRev[name]})
	}
	g.exists = false
	g.members = map[string]int64{}
	v := prev.Version + 1
	g.state = events.Group{
		Key: key, Name: prev.Name, Version: v, CreatedAt: prev.CreatedAt, UpdatedAt: w.tick(),
		Deleted: true, LastDeletedVersion: v,
	}
	return w.record(events.KindGroup, key, v, &events.GroupDeleted{Group: g.state, PreviousID: prev.ID, Members: members},
		map[string]events.Change{"deleted": {Old: false, New: true}})
}

func (w *world) addMember(key, name string) events.Envelope {
	g, u := w.liveGroup(key), w.live(name)
	if _, ok := g.members[name]; ok {
		panic("world: already a member")
	}
	w.memRev[name]++
	g.state.Version++
	g.state.UpdatedAt = w.tick()
	g.members[name] = g.state.Version
	delete(w.bulk, [2]string{key, name})
	return w.record(events.KindGroup, key, g.state.Version, &events.GroupMemberAdded{
		Group: g.state, Username: name, UserID: u.state.ID, MembershipRev: w.memRev[name],
	}, map[string]events.Change{"members": {New: name}})
}

func (w *world) removeMember(key, name string) events.Envelope {
	g := w.liveGroup(key)
	if _, ok := g.members[name]; !ok {
		panic("world: not a member")
	}
	delete(g.members, name)
	g.state.Version++
	g.state.UpdatedAt = w.tick()
	return w.record(events.KindGroup, key, g.state.Version, &events.GroupMemberRemoved{
		Group: g.state, Username: name, UserID: w.users[name].state.ID,
	}, map[string]events.Change{"members": {Old: name}})
}

// changeMembers adds and removes many users at one group version, deciding each
// addition's revision from the user's last delete, as the write side does.
func (w *world) changeMembers(key string, add, remove []string) events.Envelope {
	g := w.liveGroup(key)
	g.state.Version++
	g.state.UpdatedAt = w.tick()
	p := &events.GroupMembersChanged{Group: g.state}
	for _, name := range add {
		u := w.live(name)
		if _, ok := g.members[name]; ok {
			panic("world: already a member")
		}
		g.members[name] = g.state.Version
		w.bulk[[2]string{key, name}] = true
		p.Added = append(p.Added, events.Member{Username: name, UserID: u.state.ID, MembershipRev: u.state.DeletedMembershipRev + 1})
	}
	for _, name := range remove {
		if _, ok := g.members[name]; !ok {
			panic("world: not a member")
		}
		delete(g.members, name)
		p.Removed = append(p.Removed, events.Member{Username: name, UserID: w.users[name].state.ID})
	}
	p.Group = g.state
	return w.record(events.KindGroup, key, g.state.Version, p, nil)
}

// addMemberRaw records a member_added that the write side would never make: no
// membership revision.
func (w *world) addMemberRaw() events.Envelope {
	w.tick()
	g := events.Group{Key: "raw", Name: "raw", Version: 2, CreatedAt: w.clock, UpdatedAt: w.clock}
	return w.record(events.KindGroup, "raw", 2, &events.GroupMemberAdded{Group: g, Username: "jdoe"}, nil)
}

func (w *world) live(name string) *userModel {
	u, ok := w.users[name]
	if !ok || !u.exists {
		panic("world: no user " + name)
	}
	return u
}

func (w *world) liveGroup(key string) *groupModel {
	g, ok := w.groups[key]
	if !ok || !g.exists {
		panic("world: no group " + key)
	}
	return g
}

func userChanges(old, cur events.User) map[string]events.Change {
	ch := map[string]events.Change{}
	add := func(field string, o, n any, same bool) {
		if !same {
			ch[field] = events.Change{Old: o, New: n}
		}
	}
	add("email", old.Email, cur.Email, old.Email == cur.Email)
	add("first_name", old.FirstName, cur.FirstName, old.FirstName == cur.FirstName)
	add("last_name", old.LastName, cur.LastName, old.LastName == cur.LastName)
	add("is_active", old.IsActive, cur.IsActive, old.IsActive == cur.IsActive)
	return ch
}
