// Package querytest builds tenants with filled read tables in DynamoDB Local for the read
// side's tests. The items are written by applying domain events through
// internal/projections, so they have exactly the shapes the projector writes.
package querytest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
)

// Start is the time of the first event of every tenant; each event comes one second after
// the one before, so update times are distinct and all fall on Day.
var Start = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// Day is Start's UTC day.
const Day = "2026-11-21"

// Keycloak settings written into every tenant row; the secret must never be served.
const (
	KeycloakURL   = "https://keycloak.example.com"
	KeycloakRealm = "acme"
	ClientID      = "ssodir-sync"
	ClientSecret  = "ciphertext-of-the-client-secret"
)

// Tenant is a tenant row plus its read tables. Its methods that build events only change
// its in-memory aggregates; Apply writes the events' effects. It is safe for concurrent use.
type Tenant struct {
	DB     *dynamodb.Client
	Names  dynamo.Names
	System string
	ID     string

	mu     sync.Mutex
	tables projections.Tables
	gen    int
	proj   *projections.Projector
	actor  string
	now    time.Time
	users  map[string]*events.User
	groups map[string]*events.Group
	// revs are the users' membership revisions, as the write side keeps them.
	revs    map[string]int64
	members map[string]map[string]bool
	applied []events.Envelope
}

// Setup creates the `{p}_Config` table if needed, the tenant's read tables and its active
// tenant row.
func Setup(ctx context.Context, db *dynamodb.Client, names dynamo.Names, system, tenant string) (*Tenant, error) {
	f := &Tenant{
		DB: db, Names: names, System: system, ID: tenant,
		proj:    projections.New(db, projections.Options{}),
		actor:   "bootstrap",
		now:     Start,
		users:   map[string]*events.User{},
		groups:  map[string]*events.Group{},
		revs:    map[string]int64{},
		members: map[string]map[string]bool{},
	}
	if err := dynamo.EnsureTable(ctx, db, dynamo.ConfigTable(names.Config())); err != nil {
		return nil, err
	}
	t, err := f.createTables(ctx, 0)
	if err != nil {
		return nil, err
	}
	f.tables = t
	now := dynamo.FormatTime(Start)
	err = dynamo.NewTenants(db, names).Put(ctx, dynamo.Tenant{
		SystemID:        system,
		TenantID:        tenant,
		Status:          dynamo.TenantActive,
		SSOType:         "keycloak",
		KeycloakURL:     KeycloakURL,
		KeycloakRealm:   KeycloakRealm,
		ClientID:        ClientID,
		ClientSecret:    ClientSecret,
		OnDelete:        "disable",
		CommandsTable:   names.Commands(system, tenant),
		UsersTable:      t.Users,
		ActivitiesTable: t.Activities,
		CreatedAt:       now,
		UpdatedAt:       now,
	}, 0)
	if err != nil {
		return nil, fmt.Errorf("put tenant %s/%s: %w", system, tenant, err)
	}
	return f, nil
}

func (f *Tenant) createTables(ctx context.Context, gen int) (projections.Tables, error) {
	t := projections.Tables{
		Users:      f.Names.Users(f.System, f.ID, gen),
		Activities: f.Names.Activities(f.System, f.ID, gen),
	}
	if err := dynamo.EnsureTable(ctx, f.DB, dynamo.UsersTable(t.Users)); err != nil {
		return t, err
	}
	if err := dynamo.EnsureTable(ctx, f.DB, dynamo.ActivitiesTable(t.Activities)); err != nil {
		return t, err
	}
	return t, nil
}

// Tables are the read tables Apply writes to now.
func (f *Tenant) Tables() projections.Tables {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tables
}

// SetActor sets the actor recorded on the events built from now on.
func (f *Tenant) SetActor(actor string) {
	f.mu.Lock()
	f.actor = actor
	f.mu.Unlock()
}

// Apply projects es into the current read tables, in order.
func (f *Tenant) Apply(ctx context.Context, es ...events.Envelope) error {
	t := f.Tables()
	for _, e := range es {
		if err := f.proj.Apply(ctx, t, e); err != nil {
			return err
		}
		f.mu.Lock()
		f.applied = append(f.applied, e)
		f.mu.Unlock()
	}
	return nil
}

// Replay does what `projector replay` does: it builds the next generation of read tables
// from every event applied so far and then switches the tenant row to them.
func (f *Tenant) Replay(ctx context.Context) (projections.Tables, error) {
	f.mu.Lock()
	f.gen++
	gen := f.gen
	es := slices.Clone(f.applied)
	f.mu.Unlock()
	t, err := f.createTables(ctx, gen)
	if err != nil {
		return t, err
	}
	if err := f.proj.ApplyBatch(ctx, t, es); err != nil {
		return t, err
	}
	tenants := dynamo.NewTenants(f.DB, f.Names)
	row, err := tenants.Get(ctx, f.System, f.ID)
	if err != nil {
		return t, err
	}
	row.UsersTable, row.ActivitiesTable, row.Generation = t.Users, t.Activities, gen
	if err := tenants.Put(ctx, row, row.RowVersion); err != nil {
		return t, err
	}
	f.mu.Lock()
	f.tables = t
	f.mu.Unlock()
	return t, nil
}

// SetStatus rewrites the tenant row's status.
func (f *Tenant) SetStatus(ctx context.Context, status string) error {
	tenants := dynamo.NewTenants(f.DB, f.Names)
	row, err := tenants.Get(ctx, f.System, f.ID)
	if err != nil {
		return err
	}
	row.Status = status
	return tenants.Put(ctx, row, row.RowVersion)
}

// tick is the time of the next event; f.mu is held.
func (f *Tenant) tick() time.Time {
	f.now = f.now.Add(time.Second)
	return f.now
}

func (f *Tenant) envelope(kind events.AggregateKind, key string, version int64, at time.Time, changes map[string]events.Change, p events.Payload) events.Envelope {
	return events.Envelope{
		EventID:       uuid.NewString(),
		Type:          p.EventType(),
		SchemaVersion: events.SchemaVersion,
		Kind:          kind,
		Key:           key,
		Version:       version,
		Actor:         f.actor,
		CommandID:     uuid.NewString(),
		CorrelationID: uuid.NewString(),
		OccurredAt:    at,
		Changes:       changes,
		Payload:       p,
	}
}

// CreateUser creates u (or creates it again after a delete, continuing its versions). Only
// the profile fields of u are used.
func (f *Tenant) CreateUser(u events.User) events.Envelope {
	f.mu.Lock()
	defer f.mu.Unlock()
	at := f.tick()
	var next events.User
	if old, ok := f.users[u.Username]; ok {
		if !old.Deleted {
			panic("querytest: user " + u.Username + " exists")
		}
		next.Version, next.DeletedMembershipRev = old.Version, old.DeletedMembershipRev
	}
	next.ID = uuid.NewString()
	next.Username, next.Email, next.FirstName, next.LastName = u.Username, u.Email, u.FirstName, u.LastName
	next.IsActive, next.Attributes = true, maps.Clone(u.Attributes)
	next.Version++
	next.CreatedAt, next.UpdatedAt = at, at
	f.users[u.Username] = &next
	return f.envelope(events.KindUser, u.Username, next.Version, at, userChanges(events.User{}, next), &events.UserCreated{User: next})
}

// UpdateUser changes a user's profile; change edits a copy of the current state.
func (f *Tenant) UpdateUser(username string, change func(*events.User)) events.Envelope {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.live(username)
	next := *old
	next.Attributes = maps.Clone(old.Attributes)
	change(&next)
	at := f.tick()
	next.Version++
	next.UpdatedAt = at
	f.users[username] = &next
	var p events.Payload = &events.UserUpdated{User: next}
	switch {
	case old.IsActive && !next.IsActive:
		p = &events.UserDeactivated{User: next}
	case !old.IsActive && next.IsActive:
		p = &events.UserActivated{User: next}
	}
	return f.envelope(events.KindUser, username, next.Version, at, userChanges(*old, next), p)
}

// DeleteUser deletes a user and its memberships.
func (f *Tenant) DeleteUser(username string) events.Envelope {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.live(username)
	at := f.tick()
	var groups []string
	for key, ms := range f.members {
		if ms[username] {
			delete(ms, username)
			groups = append(groups, key)
		}
	}
	slices.Sort(groups)
	tomb := events.User{ID: old.ID, Username: username, Version: old.Version + 1, CreatedAt: old.CreatedAt,
		UpdatedAt: at, Deleted: true, DeletedMembershipRev: f.revs[username]}
	f.users[username] = &tomb
	return f.envelope(events.KindUser, username, tomb.Version, at, nil,
		&events.UserDeleted{User: tomb, PreviousID: old.ID, Groups: groups})
}

func (f *Tenant) live(username string) *events.User {
	u, ok := f.users[username]
	if !ok || u.Deleted {
		panic("querytest: no user " + username)
	}
	return u
}

func (f *Tenant) liveGroup(name string) *events.Group {
	g, ok := f.groups[strings.ToLower(name)]
	if !ok || g.Deleted {
		panic("querytest: no group " + name)
	}
	return g
}

// CreateGroup creates a group (or creates it again after a delete).
func (f *Tenant) CreateGroup(name, description string) events.Envelope {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := strings.ToLower(name)
	at := f.tick()
	next := events.Group{ID: uuid.NewString(), Key: key, Name: name, Description: description, CreatedAt: at, UpdatedAt: at}
	if old, ok := f.groups[key]; ok {
		if !old.Deleted {
			panic("querytest: group " + name + " exists")
		}
		next.Version, next.LastDeletedVersion = old.Version, old.LastDeletedVersion
	}
	next.Version++
	f.groups[key] = &next
	f.members[key] = map[string]bool{}
	ch := map[string]events.Change{"name": {New: name}}
	if description != "" {
		ch["description"] = events.Change{New: description}
	}
	return f.envelope(events.KindGroup, key, next.Version, at, ch, &events.GroupCreated{Group: next})
}

// UpdateGroup changes a group; change edits a copy of the current state.
func (f *Tenant) UpdateGroup(name string, change func(*events.Group)) events.Envelope {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.liveGroup(name)
	next := *old
	next.Attributes = maps.Clone(old.Attributes)
	change(&next)
	at := f.tick()
	next.Version++
	next.UpdatedAt = at
	f.groups[next.Key] = &next
	ch := map[string]events.Change{}
	if old.Description != next.Description {
		ch["description"] = events.Change{Old: old.Description, New: next.Description}
	}
	return f.envelope(events.KindGroup, next.Key, next.Version, at, ch, &events.GroupUpdated{Group: next})
}

// DeleteGroup deletes a group and its memberships.
func (f *Tenant) DeleteGroup(name string) events.Envelope {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.liveGroup(name)
	at := f.tick()
	tomb := events.Group{ID: old.ID, Key: old.Key, Name: old.Name, Version: old.Version + 1, CreatedAt: old.CreatedAt,
		UpdatedAt: at, Deleted: true}
	tomb.LastDeletedVersion = tomb.Version
	f.groups[old.Key] = &tomb
	f.members[old.Key] = map[string]bool{}
	return f.envelope(events.KindGroup, old.Key, tomb.Version, at, nil, &events.GroupDeleted{Group: tomb, PreviousID: old.ID})
}

// AddMember adds a user to a group: a new group version and a new membership revision of
// the user.
func (f *Tenant) AddMember(group, username string) events.Envelope {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.liveGroup(group)
	u := f.live(username)
	at := f.tick()
	next := *g
	next.Version++
	next.UpdatedAt = at
	f.groups[g.Key] = &next
	f.revs[username]++
	f.members[g.Key][username] = true
	return f.envelope(events.KindGroup, g.Key, next.Version, at,
		map[string]events.Change{"members": {New: username}},
		&events.GroupMemberAdded{Group: next, Username: username, UserID: u.ID, MembershipRev: f.revs[username]})
}

// RemoveMember removes a user from a group.
func (f *Tenant) RemoveMember(group, username string) events.Envelope {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.liveGroup(group)
	u := f.live(username)
	at := f.tick()
	next := *g
	next.Version++
	next.UpdatedAt = at
	f.groups[g.Key] = &next
	delete(f.members[g.Key], username)
	return f.envelope(events.KindGroup, g.Key, next.Version, at,
		map[string]events.Change{"members": {Old: username}},
		&events.GroupMemberRemoved{Group: next, Username: username, UserID: u.ID})
}

func userChanges(old, next events.User) map[string]events.Change {
	ch := map[string]events.Change{}
	diff := func(field string, a, b any, equal bool) {
		if !equal {
			ch[field] = events.Change{Old: a, New: b}
		}
	}
	diff("email", nilIfEmpty(old.Email), nilIfEmpty(next.Email), old.Email == next.Email)
	diff("first_name", nilIfEmpty(old.FirstName), nilIfEmpty(next.FirstName), old.FirstName == next.FirstName)
	diff("last_name", nilIfEmpty(old.LastName), nilIfEmpty(next.LastName), old.LastName == next.LastName)
	if old.Version > 0 || old.Username != "" {
		diff("is_active", old.IsActive, next.IsActive, old.IsActive == next.IsActive)
	}
	return ch
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
