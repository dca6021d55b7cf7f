package commands_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/secrets"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// The tests read "given these commands were accepted, when this command, then these events
// (read back from the config#<version> records) or this error", over the real
// dynamo.CommandStore on DynamoDB Local, with a fresh tenant per case.

const actor = "alice"

// world is one tenant's write side: the real store, the handlers, and the raw table.
type world struct {
	t      *testing.T
	db     *dynamodb.Client
	names  dynamo.Names
	store  commands.Store
	real   *dynamo.CommandStore
	tenant commands.Tenant
	box    *secrets.Box
	reg    *events.Registry
}

// The tables every tenant shares are created once per test binary, under one prefix.
var (
	sharedOnce  sync.Once
	sharedNames dynamo.Names
	sharedErr   error
)

func sharedTables(t *testing.T, local *dynamotest.Local) dynamo.Names {
	t.Helper()
	sharedOnce.Do(func() {
		sharedNames = dynamo.Names{Prefix: dynamotest.UniqueName("cmdtest")}
		sharedErr = dynamo.EnsureSharedTables(context.Background(), local.DynamoDB(), sharedNames, dynamo.TableSettings{})
	})
	if sharedErr != nil {
		t.Fatalf("shared tables: %v", sharedErr)
	}
	return sharedNames
}

func newKey(t testing.TB) []byte {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return key
}

func newWorld(t *testing.T) *world {
	t.Helper()
	local := dynamotest.Current(t)
	return newWorldOn(t, local, sharedTables(t, local))
}

// newPrivateWorld is a world on a DynamoDB Local of the test's own (dynamotest.Private),
// for a test that writes many records.
func newPrivateWorld(t *testing.T) *world {
	t.Helper()
	local := dynamotest.Private(t)
	names := dynamo.Names{Prefix: dynamotest.UniqueName("cmdtest")}
	if err := dynamo.EnsureSharedTables(t.Context(), local.DynamoDB(), names, dynamo.TableSettings{}); err != nil {
		t.Fatalf("shared tables: %v", err)
	}
	return newWorldOn(t, local, names)
}

func newWorldOn(t *testing.T, local *dynamotest.Local, names dynamo.Names) *world {
	t.Helper()
	db := local.DynamoDB()
	tenant := commands.Tenant{System: "acme", ID: dynamotest.UniqueName("t")}
	if err := dynamo.NewTenantStore(db, names).EnsureTables(t.Context(), tenant.System, tenant.ID); err != nil {
		t.Fatalf("tenant tables: %v", err)
	}
	t.Cleanup(func() {
		for _, name := range []string{names.Commands(tenant.System, tenant.ID), names.Users(tenant.System, tenant.ID, 0),
			names.Activities(tenant.System, tenant.ID, 0)} {
			if err := dynamo.DeleteTable(context.Background(), db, name); err != nil {
				t.Errorf("clean up: %v", err)
			}
		}
	})
	box, err := secrets.NewLocal(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	reg := events.NewRegistry()
	store := dynamo.NewCommandStore(db, names, reg, 0)
	return &world{t: t, db: db, names: names, store: store, real: store, tenant: tenant, box: box, reg: reg}
}

// step is a command with the headers a client may send with it.
type step struct {
	cmd     any
	ifMatch int64
	idem    *commands.Idempotency
}

// exec runs one command through its handler, as the command API does.
func (w *world) exec(ctx context.Context, s step) (any, error) {
	d := commands.Deps{Store: w.store, Now: time.Now, NewID: uuid.NewString}
	m := commands.Meta{Actor: actor, CommandID: uuid.NewString(), CorrelationID: "corr-" + uuid.NewString()[:8], Idempotency: s.idem}
	if s.ifMatch != 0 {
		m.IfMatch = &s.ifMatch
	}
	switch c := s.cmd.(type) {
	case commands.CreateUser:
		return commands.NewCreateUserHandler(d, w.box).Handle(ctx, w.tenant, c, m)
	case commands.UpdateUser:
		return commands.NewUpdateUserHandler(d).Handle(ctx, w.tenant, c, m)
	case commands.ChangePassword:
		return commands.NewChangePasswordHandler(d, w.box).Handle(ctx, w.tenant, c, m)
	case commands.SetUserActive:
		return commands.NewSetUserActiveHandler(d).Handle(ctx, w.tenant, c, m)
	case commands.DeleteUser:
		return commands.NewDeleteUserHandler(d).Handle(ctx, w.tenant, c, m)
	case commands.RenameUser:
		return commands.NewRenameUserHandler(d).Handle(ctx, w.tenant, c, m)
	case commands.RenameGroup:
		return commands.NewRenameGroupHandler(d).Handle(ctx, w.tenant, c, m)
	case commands.CreateGroup:
		return commands.NewCreateGroupHandler(d).Handle(ctx, w.tenant, c, m)
	case commands.UpdateGroup:
		return commands.NewUpdateGroupHandler(d).Handle(ctx, w.tenant, c, m)
	case commands.DeleteGroup:
		return commands.NewDeleteGroupHandler(d).Handle(ctx, w.tenant, c, m)
	case commands.AddMember:
		return commands.NewAddMemberHandler(d).Handle(ctx, w.tenant, c, m)
	case commands.RemoveMember:
		return commands.NewRemoveMemberHandler(d).Handle(ctx, w.tenant, c, m)
	case commands.ChangeMembers:
		return commands.NewChangeMembersHandler(d).Handle(ctx, w.tenant, c, m)
	case manyUsers:
		return nil, w.createMany(ctx, c)
	case manyGroups:
		return nil, w.execMany(ctx, c, func(g string) any { return createGroup(g) })
	}
	w.t.Fatalf("no handler for %T", s.cmd)
	return nil, nil
}

// given runs steps that must be accepted.
func (w *world) given(steps ...any) {
	w.t.Helper()
	for _, s := range steps {
		st, ok := s.(step)
		if !ok {
			st = step{cmd: s}
		}
		if _, err := w.exec(w.t.Context(), st); err != nil {
			w.t.Fatalf("given %T %+v: %v", st.cmd, st.cmd, err)
		}
	}
}

// items scans the tenant's write table (test code only: the service never scans).
func (w *world) items() []map[string]types.AttributeValue {
	w.t.Helper()
	var out []map[string]types.AttributeValue
	p := dynamodb.NewScanPaginator(w.db, &dynamodb.ScanInput{
		TableName: aws.String(w.names.Commands(w.tenant.System, w.tenant.ID)), ConsistentRead: aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(w.t.Context())
		if err != nil {
			w.t.Fatalf("scan: %v", err)
		}
		out = append(out, page.Items...)
	}
	return out
}

func itemKey(it map[string]types.AttributeValue) string { return s(it, "id") + "|" + s(it, "sk") }

func s(it map[string]types.AttributeValue, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// history is every config#<version> record of the tenant, decoded, by item key.
func (w *world) history() map[string]events.Envelope {
	w.t.Helper()
	out := map[string]events.Envelope{}
	for _, it := range w.items() {
		if !dynamo.IsHistorySK(s(it, "sk")) {
			continue
		}
		e, err := dynamo.DecodeRecord(w.reg, it)
		if err != nil {
			w.t.Fatalf("decode %s: %v", itemKey(it), err)
		}
		out[itemKey(it)] = e
	}
	return out
}

// record is the decoded record of one version of an aggregate.
func (w *world) record(kind events.AggregateKind, key string, version int64) events.Envelope {
	w.t.Helper()
	e, err := w.real.LoadRecord(w.t.Context(), w.tenant, kind, key, version)
	if err != nil {
		w.t.Fatalf("record %s %s v%d: %v", kind, key, version, err)
	}
	return e
}

// event is what a case expects of one recorded event: its type, aggregate and version,
// and the facts (see factsOf) it names.
type event struct {
	Type    events.Type
	Key     string
	Version int64
	Facts   map[string]any
}

func (e event) String() string { return fmt.Sprintf("%s %s v%d %v", e.Type, e.Key, e.Version, e.Facts) }

// factsOf are the key fields of an event, named so that cases can list the few they mean.
func factsOf(e events.Envelope) map[string]any {
	changes := make([]string, 0, len(e.Changes))
	for k := range e.Changes {
		changes = append(changes, k)
	}
	slices.Sort(changes)
	f := map[string]any{"actor": e.Actor, "changes": changes}
	if u, ok := events.UserState(e.Payload); ok {
		f["username"], f["email"], f["is_active"], f["deleted"] = u.Username, u.Email, u.IsActive, u.Deleted
		f["first_name"], f["last_name"], f["attributes"] = u.FirstName, u.LastName, u.Attributes
	}
	if g, ok := events.GroupState(e.Payload); ok {
		f["name"], f["key"], f["description"], f["deleted"], f["attributes"] = g.Name, g.Key, g.Description, g.Deleted, g.Attributes
	}
	switch p := e.Payload.(type) {
	case *events.UserCreated:
		f["has_password"] = p.PasswordCiphertext != ""
	case *events.UserDeleted:
		groups := slices.Clone(p.Groups)
		slices.Sort(groups)
		f["groups"], f["group_count"] = groups, len(groups)
	case *events.GroupMemberAdded:
		f["member"] = p.Username
	case *events.GroupMemberRemoved:
		f["member"] = p.Username
	case *events.GroupMembersChanged:
		names := func(ms []events.Member) []string {
			out := []string{}
			for _, m := range ms {
				out = append(out, m.Username)
			}
			return out
		}
		f["added"], f["removed"] = names(p.Added), names(p.Removed)
	}
	return f
}

// checkInvariants holds for every record: the payload's state is the record's version of
// the aggregate it names, and the change set never holds a password.
func checkInvariants(t *testing.T, e events.Envelope) {
	t.Helper()
	var version int64
	var key string
	if u, ok := events.UserState(e.Payload); ok {
		version, key = u.Version, u.Username
		if e.Kind != events.KindUser {
			t.Errorf("%s v%d: user payload under kind %s", e.Key, e.Version, e.Kind)
		}
	} else if g, ok := events.GroupState(e.Payload); ok {
		version, key = g.Version, g.Key
		if e.Kind != events.KindGroup {
			t.Errorf("%s v%d: group payload under kind %s", e.Key, e.Version, e.Kind)
		}
	} else {
		t.Errorf("%s v%d: payload %T carries no state", e.Key, e.Version, e.Payload)
	}
	if version != e.Version || key != e.Key {
		t.Errorf("record %s v%d carries the state of %s v%d", e.Key, e.Version, key, version)
	}
	if e.Type != e.Payload.EventType() || e.SchemaVersion != events.SchemaVersion || e.EventID == "" ||
		e.CommandID == "" || e.CorrelationID == "" || e.OccurredAt.IsZero() || e.Actor != actor {
		t.Errorf("record %s v%d has incomplete metadata: %+v", e.Key, e.Version, e)
	}
	for field := range e.Changes {
		if strings.Contains(field, "password") {
			t.Errorf("record %s v%d: change set holds %q", e.Key, e.Version, field)
		}
	}
}

// versionOf is the version a handler answered with.
func versionOf(result any) int64 {
	switch r := result.(type) {
	case events.User:
		return r.Version
	case events.Group:
		return r.Version
	case int64:
		return r
	}
	return -1
}

// commandCase is one given / when / then.
type commandCase struct {
	name  string
	given []any
	when  step
	// then are the events the command records, in aggregate and version order; none for a
	// command that changes nothing.
	then []event
	// err is the expected error code (apperr), with the fields at fault for validation.
	err    string
	fields []string
	// version is the version the handler answers with (0: not checked).
	version int64
	// also checks what the events cannot show (the write model's items, ids, secrets).
	also func(t *testing.T, w *world, result any)
}

func runCases(t *testing.T, cases []commandCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.given(tc.given...)
			before := w.history()
			result, err := w.exec(t.Context(), tc.when)
			after := w.history()

			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("when %T: %v, want it accepted", tc.when.cmd, err)
			case tc.err != "":
				if got := apperr.CodeOf(err); got != tc.err {
					t.Fatalf("when %T: error %v (code %s), want code %s", tc.when.cmd, err, got, tc.err)
				}
				var fields []string
				if e, ok := apperr.As(err); ok {
					for _, f := range e.Fields {
						fields = append(fields, f.Field)
					}
				}
				slices.Sort(fields)
				fields = slices.Compact(fields)
				if want := slices.Sorted(slices.Values(tc.fields)); len(tc.fields) > 0 && !slices.Equal(fields, want) {
					t.Errorf("fields at fault %v, want %v", fields, want)
				}
			}

			var got []events.Envelope
			for k, e := range after {
				if _, ok := before[k]; !ok {
					got = append(got, e)
				}
				checkInvariants(t, e)
			}
			for k := range before {
				if _, ok := after[k]; !ok {
					t.Errorf("record %s disappeared: history is immutable", k)
				}
			}
			slices.SortFunc(got, func(a, b events.Envelope) int {
				return strings.Compare(fmt.Sprintf("%s|%012d", a.Key, a.Version), fmt.Sprintf("%s|%012d", b.Key, b.Version))
			})
			if len(got) != len(tc.then) {
				var desc []string
				for _, e := range got {
					desc = append(desc, fmt.Sprintf("%s %s v%d", e.Type, e.Key, e.Version))
				}
				t.Fatalf("recorded %d events %v, want %d: %v", len(got), desc, len(tc.then), tc.then)
			}
			for i, want := range tc.then {
				e := got[i]
				if e.Type != want.Type || e.Key != want.Key || e.Version != want.Version {
					t.Errorf("event %d is %s %s v%d, want %s %s v%d", i, e.Type, e.Key, e.Version, want.Type, want.Key, want.Version)
				}
				facts := factsOf(e)
				for name, v := range want.Facts {
					if !reflect.DeepEqual(facts[name], v) {
						t.Errorf("event %d (%s %s v%d): %s = %#v, want %#v", i, e.Type, e.Key, e.Version, name, facts[name], v)
					}
				}
			}
			if tc.version != 0 && err == nil {
				if v := versionOf(result); v != tc.version {
					t.Errorf("answered version %d, want %d", v, tc.version)
				}
			}
			if tc.also != nil && !t.Failed() {
				tc.also(t, w, result)
			}
		})
	}
}

// Command builders, to keep the cases short.

func createUser(username, email string) commands.CreateUser {
	return commands.CreateUser{Username: username, Email: email, FirstName: "First", LastName: "Last"}
}

func createGroup(name string) commands.CreateGroup { return commands.CreateGroup{Name: name} }

func addMember(group, username string) commands.AddMember {
	return commands.AddMember{Group: group, Username: username}
}

func ptr[T any](v T) *T { return &v }

func ifMatch(v int64, cmd any) step { return step{cmd: cmd, ifMatch: v} }

// groupsWithMember are n groups g000…, with username a member of each.
func groupsWithMember(n int, username string) []any {
	groups := make(manyGroups, n)
	for i := range groups {
		groups[i] = fmt.Sprintf("g%03d", i)
	}
	// The groups are created at once; the joins, which all change the one user's
	// memberships, one after another.
	steps := []any{groups}
	for _, g := range groups {
		steps = append(steps, addMember(g, username))
	}
	return steps
}

// usersInGroup are n users u000…, each a member of group.
func usersInGroup(n int, group string) []any {
	var steps []any
	for i := range n {
		u := fmt.Sprintf("u%03d", i)
		steps = append(steps, createUser(u, u+"@example.com"), addMember(group, u))
	}
	return steps
}

// hasItem reports whether the tenant's write table holds the item id/sk.
func (w *world) hasItem(id, sk string) bool {
	w.t.Helper()
	out, err := w.db.GetItem(w.t.Context(), &dynamodb.GetItemInput{
		TableName: aws.String(w.names.Commands(w.tenant.System, w.tenant.ID)),
		Key: map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberS{Value: id}, "sk": &types.AttributeValueMemberS{Value: sk},
		},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return out.Item != nil
}

// noMemberships asserts that the write model holds no membership of username, from either
// side (group member items and the user's group pointers).
func noMemberships(t *testing.T, w *world, username string) {
	t.Helper()
	for _, it := range w.items() {
		id, sk := s(it, "id"), s(it, "sk")
		if (strings.HasPrefix(id, "group#") && sk == dynamo.MemberSK(username)) ||
			(id == dynamo.UserID(username) && strings.HasPrefix(sk, "group#")) {
			t.Errorf("membership item %s/%s is left", id, sk)
		}
	}
}

// groupHasNoMembers asserts that the write model holds no membership in group key.
func groupHasNoMembers(t *testing.T, w *world, key string) {
	t.Helper()
	for _, it := range w.items() {
		id, sk := s(it, "id"), s(it, "sk")
		if (id == dynamo.GroupID(key) && dynamo.IsMemberSK(sk)) || sk == dynamo.GroupPointerSK(key) {
			t.Errorf("membership item %s/%s is left", id, sk)
		}
	}
}

func emailGuard(t *testing.T, w *world, email string) bool {
	t.Helper()
	return w.hasItem("email#"+email, "guard")
}
