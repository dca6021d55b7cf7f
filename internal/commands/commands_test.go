package commands_test

import (
	"context"
	"crypto/rand"
	"errors"
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
	names := sharedTables(t, local)
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
	var steps []any
	for i := range n {
		steps = append(steps, createGroup(fmt.Sprintf("g%03d", i)), addMember(fmt.Sprintf("g%03d", i), username))
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

func TestUserCommands(t *testing.T) {
	runCases(t, []commandCase{
		{
			name: "a new username and email create version 1 of the user",
			when: step{cmd: createUser("jdoe", "jdoe@example.com")},
			then: []event{{events.UserCreatedType, "jdoe", 1, map[string]any{
				"username": "jdoe", "email": "jdoe@example.com", "is_active": true, "deleted": false,
				"has_password": false, "actor": actor, "changes": []string{"email", "first_name", "is_active", "last_name"},
			}}},
			version: 1,
			also: func(t *testing.T, w *world, _ any) {
				if !emailGuard(t, w, "jdoe@example.com") {
					t.Error("the email's guard item was not written")
				}
			},
		},
		{
			name: "a username and email in upper case are stored lower-cased",
			when: step{cmd: createUser("JDoe", "JDoe@Example.COM")},
			then: []event{{events.UserCreatedType, "jdoe", 1, map[string]any{"username": "jdoe", "email": "jdoe@example.com"}}},
		},
		{
			name: "a user created inactive is recorded inactive",
			when: step{cmd: commands.CreateUser{Username: "jdoe", IsActive: ptr(false)}},
			then: []event{{events.UserCreatedType, "jdoe", 1, map[string]any{"is_active": false, "email": ""}}},
		},
		{
			name:  "a taken username is refused",
			given: []any{createUser("jdoe", "jdoe@example.com")},
			when:  step{cmd: createUser("JDOE", "other@example.com")},
			err:   apperr.CodeUsernameTaken,
		},
		{
			name:  "a taken email is refused, whatever its case",
			given: []any{createUser("jdoe", "jdoe@example.com")},
			when:  step{cmd: createUser("john", "JDoe@EXAMPLE.com")},
			err:   apperr.CodeEmailTaken,
		},
		{
			name:  "a user created again after a delete continues its versions and gets a new id",
			given: []any{createUser("jdoe", "jdoe@example.com"), commands.DeleteUser{Username: "jdoe"}},
			when:  step{cmd: createUser("jdoe", "jdoe@example.com")},
			then:  []event{{events.UserCreatedType, "jdoe", 3, map[string]any{"email": "jdoe@example.com", "deleted": false}}},
			also: func(t *testing.T, w *world, _ any) {
				first := w.record(events.KindUser, "jdoe", 1).Payload.(*events.UserCreated).User.ID
				again := w.record(events.KindUser, "jdoe", 3).Payload.(*events.UserCreated).User.ID
				deleted := w.record(events.KindUser, "jdoe", 2).Payload.(*events.UserDeleted)
				if first == "" || again == "" || first == again || deleted.PreviousID != first {
					t.Errorf("ids: first %q, deleted %q, again %q; want two different ids", first, deleted.PreviousID, again)
				}
			},
		},
		{
			name: "every invalid field is reported by name",
			when: step{cmd: commands.CreateUser{
				Username: "not valid!", Email: "not-an-email", FirstName: strings.Repeat("x", 256),
				LastName: "bell\a", Attributes: map[string][]string{"": {"x"}}, Password: ptr("short"),
			}},
			err:    apperr.CodeValidationFailed,
			fields: []string{"attributes", "email", "first_name", "last_name", "password", "username"},
		},
		{
			name:   "an empty username is refused",
			when:   step{cmd: commands.CreateUser{Username: ""}},
			err:    apperr.CodeValidationFailed,
			fields: []string{"username"},
		},
		{
			name: "too many attributes are refused",
			when: step{cmd: commands.CreateUser{Username: "jdoe", Attributes: func() map[string][]string {
				m := map[string][]string{}
				for i := range 51 {
					m[fmt.Sprint("k", i)] = []string{"v"}
				}
				return m
			}()}},
			err:    apperr.CodeValidationFailed,
			fields: []string{"attributes"},
		},
		{
			name: "a password given at creation is recorded only as ciphertext",
			when: step{cmd: commands.CreateUser{Username: "jdoe", Password: ptr("correct horse battery")}},
			then: []event{{events.UserCreatedType, "jdoe", 1, map[string]any{"has_password": true}}},
			also: func(t *testing.T, w *world, _ any) {
				ct := w.record(events.KindUser, "jdoe", 1).Payload.(*events.UserCreated).PasswordCiphertext
				checkPassword(t, w, "jdoe", ct, "correct horse battery")
			},
		},
	})
}

// checkPassword asserts that ct is the password's ciphertext and that the plaintext is in
// no item of the tenant.
func checkPassword(t *testing.T, w *world, username, ct, plaintext string) {
	t.Helper()
	if ct == "" || strings.Contains(ct, plaintext) {
		t.Fatalf("password ciphertext %q", ct)
	}
	pt, err := w.box.Decrypt(t.Context(), ct, "password:"+w.tenant.System+"/"+w.tenant.ID+"/"+username)
	if err != nil || string(pt) != plaintext {
		t.Errorf("ciphertext decrypts to %q, %v", pt, err)
	}
	user, err := w.real.LoadUser(t.Context(), w.tenant, username)
	if err != nil || user.PasswordCiphertext != ct {
		t.Errorf("config holds password %q (%v), want the record's ciphertext", user.PasswordCiphertext, err)
	}
	for _, it := range w.items() {
		if k, ok := findPlaintext(it, plaintext); ok {
			t.Errorf("item %s holds the password in clear in %s", itemKey(it), k)
		}
	}
}

// findPlaintext looks for plaintext in every string of an item, at any depth.
func findPlaintext(it map[string]types.AttributeValue, plaintext string) (string, bool) {
	var walk func(path string, v types.AttributeValue) (string, bool)
	walk = func(path string, v types.AttributeValue) (string, bool) {
		switch x := v.(type) {
		case *types.AttributeValueMemberS:
			return path, strings.Contains(x.Value, plaintext)
		case *types.AttributeValueMemberB:
			return path, strings.Contains(string(x.Value), plaintext)
		case *types.AttributeValueMemberSS:
			for _, s := range x.Value {
				if strings.Contains(s, plaintext) {
					return path, true
				}
			}
		case *types.AttributeValueMemberL:
			for i, e := range x.Value {
				if p, ok := walk(fmt.Sprintf("%s[%d]", path, i), e); ok {
					return p, true
				}
			}
		case *types.AttributeValueMemberM:
			for k, e := range x.Value {
				if p, ok := walk(path+"."+k, e); ok {
					return p, true
				}
			}
		}
		return "", false
	}
	for k, v := range it {
		if p, ok := walk(k, v); ok {
			return p, true
		}
	}
	return "", false
}

func TestUpdateUser(t *testing.T) {
	jdoe := createUser("jdoe", "jdoe@example.com")
	runCases(t, []commandCase{
		{
			name:  "changing the email records user.updated with the change",
			given: []any{jdoe},
			when:  step{cmd: commands.UpdateUser{Username: "jdoe", Email: ptr("New@Example.com")}},
			then: []event{{events.UserUpdatedType, "jdoe", 2, map[string]any{
				"email": "new@example.com", "changes": []string{"email"}, "first_name": "First",
			}}},
			version: 2,
			also: func(t *testing.T, w *world, _ any) {
				if emailGuard(t, w, "jdoe@example.com") || !emailGuard(t, w, "new@example.com") {
					t.Error("the old email's guard is kept or the new one's is missing")
				}
			},
		},
		{
			name:  "an email given up by an update can be taken by another user",
			given: []any{jdoe, commands.UpdateUser{Username: "jdoe", Email: ptr("new@example.com")}},
			when:  step{cmd: createUser("john", "jdoe@example.com")},
			then:  []event{{events.UserCreatedType, "john", 1, map[string]any{"email": "jdoe@example.com"}}},
		},
		{
			name:  "an email taken by an update cannot be used by another user",
			given: []any{jdoe, commands.UpdateUser{Username: "jdoe", Email: ptr("new@example.com")}},
			when:  step{cmd: createUser("john", "NEW@example.com")},
			err:   apperr.CodeEmailTaken,
		},
		{
			name:  "changing the email to another user's is refused",
			given: []any{jdoe, createUser("john", "john@example.com")},
			when:  step{cmd: commands.UpdateUser{Username: "john", Email: ptr("JDOE@example.com")}},
			err:   apperr.CodeEmailTaken,
			also: func(t *testing.T, w *world, _ any) {
				if !emailGuard(t, w, "john@example.com") {
					t.Error("the refused update released john's email")
				}
			},
		},
		{
			name:  "clearing the email frees it",
			given: []any{jdoe},
			when:  step{cmd: commands.UpdateUser{Username: "jdoe", Email: ptr("")}},
			then:  []event{{events.UserUpdatedType, "jdoe", 2, map[string]any{"email": "", "changes": []string{"email"}}}},
			also: func(t *testing.T, w *world, _ any) {
				if emailGuard(t, w, "jdoe@example.com") {
					t.Error("the cleared email's guard is kept")
				}
			},
		},
		{
			name:    "an update that changes nothing records nothing and answers the current version",
			given:   []any{jdoe},
			when:    step{cmd: commands.UpdateUser{Username: "jdoe", Email: ptr("JDOE@example.com"), FirstName: ptr("First")}},
			version: 1,
		},
		{
			name:  "attributes replace the whole map",
			given: []any{commands.CreateUser{Username: "jdoe", Attributes: map[string][]string{"a": {"1"}, "b": {"2"}}}},
			when:  step{cmd: commands.UpdateUser{Username: "jdoe", Attributes: &map[string][]string{"c": {"3"}}}},
			then: []event{{events.UserUpdatedType, "jdoe", 2, map[string]any{
				"attributes": map[string][]string{"c": {"3"}}, "changes": []string{"attributes"},
			}}},
		},
		{
			name:  "an update with the current If-Match is accepted",
			given: []any{jdoe},
			when:  ifMatch(1, commands.UpdateUser{Username: "jdoe", LastName: ptr("Doe")}),
			then:  []event{{events.UserUpdatedType, "jdoe", 2, map[string]any{"last_name": "Doe"}}},
		},
		{
			name:  "an update with a stale If-Match is refused",
			given: []any{jdoe, commands.UpdateUser{Username: "jdoe", LastName: ptr("Doe")}},
			when:  ifMatch(1, commands.UpdateUser{Username: "jdoe", LastName: ptr("Roe")}),
			err:   apperr.CodeVersionMismatch,
		},
		{
			name:   "an invalid email is refused by field",
			given:  []any{jdoe},
			when:   step{cmd: commands.UpdateUser{Username: "jdoe", Email: ptr("jdoe@"), LastName: ptr("x\x00")}},
			err:    apperr.CodeValidationFailed,
			fields: []string{"email", "last_name"},
		},
		{
			name: "an unknown user is not found",
			when: step{cmd: commands.UpdateUser{Username: "nobody", LastName: ptr("Doe")}},
			err:  apperr.CodeNotFound,
		},
		{
			name:  "a deleted user is not found",
			given: []any{jdoe, commands.DeleteUser{Username: "jdoe"}},
			when:  step{cmd: commands.UpdateUser{Username: "jdoe", LastName: ptr("Doe")}},
			err:   apperr.CodeNotFound,
		},
	})
}

func TestChangePassword(t *testing.T) {
	jdoe := createUser("jdoe", "jdoe@example.com")
	runCases(t, []commandCase{
		{
			name:    "a password change is a new version whose payload holds ciphertext, not the password",
			given:   []any{jdoe},
			when:    step{cmd: commands.ChangePassword{Username: "jdoe", Password: "plaintext-Pa55word"}},
			then:    []event{{events.UserPasswordChangedType, "jdoe", 2, map[string]any{"changes": []string{}, "email": "jdoe@example.com"}}},
			version: 2,
			also: func(t *testing.T, w *world, _ any) {
				e := w.record(events.KindUser, "jdoe", 2)
				checkPassword(t, w, "jdoe", e.Payload.(*events.UserPasswordChanged).PasswordCiphertext, "plaintext-Pa55word")
			},
		},
		{
			name:  "setting the same password again is still a new version",
			given: []any{jdoe, commands.ChangePassword{Username: "jdoe", Password: "plaintext-Pa55word"}},
			when:  step{cmd: commands.ChangePassword{Username: "jdoe", Password: "plaintext-Pa55word"}},
			then:  []event{{events.UserPasswordChangedType, "jdoe", 3, nil}},
		},
		{
			name:   "a password shorter than 8 characters is refused",
			given:  []any{jdoe},
			when:   step{cmd: commands.ChangePassword{Username: "jdoe", Password: "1234567"}},
			err:    apperr.CodeValidationFailed,
			fields: []string{"password"},
		},
		{
			name:   "a password longer than 128 characters is refused",
			given:  []any{jdoe},
			when:   step{cmd: commands.ChangePassword{Username: "jdoe", Password: strings.Repeat("p", 129)}},
			err:    apperr.CodeValidationFailed,
			fields: []string{"password"},
		},
		{
			name:  "a password change with a stale If-Match is refused",
			given: []any{jdoe, commands.ChangePassword{Username: "jdoe", Password: "first-password"}},
			when:  ifMatch(1, commands.ChangePassword{Username: "jdoe", Password: "second-password"}),
			err:   apperr.CodeVersionMismatch,
		},
		{
			name: "the password of an unknown user is not found",
			when: step{cmd: commands.ChangePassword{Username: "nobody", Password: "plaintext-Pa55word"}},
			err:  apperr.CodeNotFound,
		},
	})
}

func TestSetUserActive(t *testing.T) {
	jdoe := createUser("jdoe", "jdoe@example.com")
	deactivate := commands.SetUserActive{Username: "jdoe", Active: false}
	activate := commands.SetUserActive{Username: "jdoe", Active: true}
	runCases(t, []commandCase{
		{
			name:    "deactivating an active user records user.deactivated",
			given:   []any{jdoe},
			when:    step{cmd: deactivate},
			then:    []event{{events.UserDeactivatedType, "jdoe", 2, map[string]any{"is_active": false, "changes": []string{"is_active"}}}},
			version: 2,
		},
		{
			name:    "deactivating an inactive user records nothing and answers the current version",
			given:   []any{jdoe, deactivate},
			when:    step{cmd: deactivate},
			version: 2,
		},
		{
			name:  "activating an inactive user records user.activated",
			given: []any{jdoe, deactivate},
			when:  step{cmd: activate},
			then:  []event{{events.UserActivatedType, "jdoe", 3, map[string]any{"is_active": true}}},
		},
		{
			name:    "activating an active user records nothing",
			given:   []any{jdoe},
			when:    step{cmd: activate},
			version: 1,
		},
		{
			name:  "deactivating with a stale If-Match is refused",
			given: []any{jdoe, commands.UpdateUser{Username: "jdoe", LastName: ptr("Doe")}},
			when:  ifMatch(1, deactivate),
			err:   apperr.CodeVersionMismatch,
		},
		{
			name: "deactivating an unknown user is not found",
			when: step{cmd: deactivate},
			err:  apperr.CodeNotFound,
		},
	})
}

func TestDeleteUser(t *testing.T) {
	jdoe := createUser("jdoe", "jdoe@example.com")
	runCases(t, []commandCase{
		{
			name:  "deleting a user records user.deleted and frees its username and email",
			given: []any{jdoe},
			when:  step{cmd: commands.DeleteUser{Username: "JDoe"}},
			then: []event{{events.UserDeletedType, "jdoe", 2, map[string]any{
				"deleted": true, "email": "", "group_count": 0, "changes": []string{"email", "first_name", "is_active", "last_name"},
			}}},
			version: 2,
			also: func(t *testing.T, w *world, _ any) {
				if emailGuard(t, w, "jdoe@example.com") {
					t.Error("the deleted user's email guard is kept")
				}
				w.given(createUser("john", "jdoe@example.com"))
			},
		},
		{
			name: "deleting a user removes its memberships from the write model",
			given: []any{jdoe, createGroup("Admins"), createGroup("Ops"), addMember("admins", "jdoe"), addMember("OPS", "jdoe"),
				createUser("john", ""), addMember("admins", "john")},
			when: step{cmd: commands.DeleteUser{Username: "jdoe"}},
			then: []event{{events.UserDeletedType, "jdoe", 2, map[string]any{"groups": []string{"admins", "ops"}}}},
			also: func(t *testing.T, w *world, _ any) {
				noMemberships(t, w, "jdoe")
				if !w.hasItem(dynamo.GroupID("admins"), dynamo.MemberSK("john")) {
					t.Error("another user's membership went too")
				}
			},
		},
		{
			name:  "deleting a user in more groups than one transaction holds removes every membership",
			given: append([]any{jdoe}, groupsWithMember(50, "jdoe")...),
			when:  step{cmd: commands.DeleteUser{Username: "jdoe"}},
			then:  []event{{events.UserDeletedType, "jdoe", 2, map[string]any{"group_count": 50}}},
			also: func(t *testing.T, w *world, _ any) {
				noMemberships(t, w, "jdoe")
				u, err := w.real.LoadUser(t.Context(), w.tenant, "jdoe")
				if err != nil || u.CleanupPending {
					t.Errorf("tombstone still marked for clean-up (%v)", err)
				}
			},
		},
		{
			name:  "a deleted user is not found",
			given: []any{jdoe, commands.DeleteUser{Username: "jdoe"}},
			when:  step{cmd: commands.DeleteUser{Username: "jdoe"}},
			err:   apperr.CodeNotFound,
		},
		{
			name:  "a delete with a stale If-Match is refused",
			given: []any{jdoe, commands.UpdateUser{Username: "jdoe", LastName: ptr("Doe")}},
			when:  ifMatch(1, commands.DeleteUser{Username: "jdoe"}),
			err:   apperr.CodeVersionMismatch,
		},
		{
			name:  "a user created again is not a member of the groups of its former self",
			given: []any{jdoe, createGroup("admins"), addMember("admins", "jdoe"), commands.DeleteUser{Username: "jdoe"}, jdoe},
			when:  step{cmd: addMember("admins", "jdoe")},
			then:  []event{{events.GroupMemberAddedType, "admins", 3, map[string]any{"member": "jdoe"}}},
		},
	})
}

// interruptedStore is the real store, except that the clean-up after a delete fails the
// first time: DynamoDB failed, or the process died, between the delete's transaction and
// its follow-up.
type interruptedStore struct {
	commands.Store
	interrupted bool
	// failed is the clean-up that failed, for running it late.
	failed commands.Cleanup
}

func (s *interruptedStore) RemoveMembersAfter(ctx context.Context, t commands.Tenant, c commands.Cleanup) error {
	if !s.interrupted {
		s.interrupted = true
		s.failed = c
		return errors.New("throttled")
	}
	return s.Store.RemoveMembersAfter(ctx, t, c)
}

// TestInterruptedDelete checks a delete whose memberships do not fit into its transaction
// and whose follow-up clean-up fails: the delete is done (it is recorded, so it is not
// answered with an error), what is left behaves as gone, and a re-create finishes the job.
func TestInterruptedDelete(t *testing.T) {
	t.Parallel()
	// Two memberships more than one transaction holds.
	n := (*dynamo.CommandStore)(nil).MaxMembersPerChange() + 2
	last := fmt.Sprintf("%03d", n-1)
	cases := []struct {
		name     string
		given    []any
		delete   any
		tomb     func(w *world) (bool, error)
		leftover any
		recreate any
		check    func(t *testing.T, w *world)
		// rejoin is made by the new incarnation; the delete's own clean-up, run late
		// (its process was paused, not dead), must leave it.
		rejoin any
		member [2]string
	}{
		{
			name:   "a user in more groups than a transaction holds",
			given:  append([]any{createUser("jdoe", "")}, groupsWithMember(n, "jdoe")...),
			delete: commands.DeleteUser{Username: "jdoe"},
			tomb: func(w *world) (bool, error) {
				u, err := w.real.LoadUser(w.t.Context(), w.tenant, "jdoe")
				return u.CleanupPending, err
			},
			leftover: commands.RemoveMember{Group: "g" + last, Username: "jdoe"},
			recreate: createUser("jdoe", ""),
			check:    func(t *testing.T, w *world) { noMemberships(t, w, "jdoe") },
			rejoin:   addMember("g"+last, "jdoe"),
			member:   [2]string{"g" + last, "jdoe"},
		},
		{
			name:   "a group with more members than a transaction holds",
			given:  append([]any{createGroup("big")}, usersInGroup(n, "big")...),
			delete: commands.DeleteGroup{Name: "big"},
			tomb: func(w *world) (bool, error) {
				g, err := w.real.LoadGroup(w.t.Context(), w.tenant, "big")
				return g.CleanupPending, err
			},
			leftover: addMember("big", "u"+last),
			recreate: createGroup("BIG"),
			check:    func(t *testing.T, w *world) { groupHasNoMembers(t, w, "big") },
			rejoin:   addMember("big", "u"+last),
			member:   [2]string{"big", "u" + last},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.given(tc.given...)
			store := &interruptedStore{Store: w.real}
			w.store = store
			if _, err := w.exec(t.Context(), step{cmd: tc.delete}); err != nil {
				t.Fatalf("the delete was recorded but answered %v", err)
			}
			leftovers := 0
			for _, it := range w.items() {
				if dynamo.IsMemberSK(s(it, "sk")) {
					leftovers++
				}
			}
			// A group delete's transaction also holds the checks of the counts of user
			// deletes its member list rests on (and the parts of a long list): fewer
			// memberships go in it.
			if leftovers < 2 || leftovers != len(store.failed.Members) {
				t.Fatalf("%d memberships left after the interrupted clean-up, want the %d (at least 2) beyond one transaction", leftovers, len(store.failed.Members))
			}
			if pending, err := tc.tomb(w); err != nil || !pending {
				t.Fatalf("the tombstone is not marked for clean-up (%v)", err)
			}
			records := len(w.history())
			if _, err := w.exec(t.Context(), step{cmd: tc.leftover}); apperr.CodeOf(err) != apperr.CodeNotFound {
				t.Errorf("a command on a left-over membership answered %v, want not found", err)
			}
			if n := len(w.history()); n != records {
				t.Errorf("a command on a left-over membership recorded %d events", n-records)
			}
			w.given(tc.recreate)
			tc.check(t, w)

			w.given(tc.rejoin)
			if err := w.real.RemoveMembersAfter(t.Context(), w.tenant, w.store.(*interruptedStore).failed); err != nil {
				t.Fatalf("the late clean-up: %v", err)
			}
			if ok, err := w.real.IsMember(t.Context(), w.tenant, tc.member[0], tc.member[1]); err != nil || !ok {
				t.Errorf("the delete's clean-up, run late, removed %s's membership of %s made after the re-create (%v)", tc.member[1], tc.member[0], err)
			}
			pointer := false
			for _, it := range w.items() {
				pointer = pointer || (s(it, "id") == dynamo.UserID(tc.member[1]) && s(it, "sk") == dynamo.GroupPointerSK(tc.member[0]))
			}
			if !pointer {
				t.Errorf("the late clean-up removed the group pointer of %s's new membership of %s", tc.member[1], tc.member[0])
			}
		})
	}
}

func TestGroupCommands(t *testing.T) {
	admins := createGroup("Admins")
	runCases(t, []commandCase{
		{
			name: "a new group is created at version 1, keyed by its lower-cased name",
			when: step{cmd: commands.CreateGroup{Name: "Team Alpha", Description: "The first\nteam", Attributes: map[string][]string{"k": {"v"}}}},
			then: []event{{events.GroupCreatedType, "team alpha", 1, map[string]any{
				"name": "Team Alpha", "key": "team alpha", "description": "The first\nteam",
				"changes": []string{"attributes", "description", "name"},
			}}},
			version: 1,
		},
		{
			name:  "a group name is unique case-insensitively",
			given: []any{admins},
			when:  step{cmd: createGroup("ADMINS")},
			err:   apperr.CodeGroupExists,
		},
		{
			name:   "an invalid group name and description are refused by field",
			when:   step{cmd: commands.CreateGroup{Name: "no/slashes", Description: strings.Repeat("d", 1025)}},
			err:    apperr.CodeValidationFailed,
			fields: []string{"description", "name"},
		},
		{
			name:   "a group name with surrounding spaces is refused",
			when:   step{cmd: createGroup(" admins")},
			err:    apperr.CodeValidationFailed,
			fields: []string{"name"},
		},
		{
			name:    "updating a group's description records group.updated, finding the group in any case",
			given:   []any{admins},
			when:    step{cmd: commands.UpdateGroup{Name: "aDmInS", Description: ptr("the admins")}},
			then:    []event{{events.GroupUpdatedType, "admins", 2, map[string]any{"description": "the admins", "name": "Admins", "changes": []string{"description"}}}},
			version: 2,
		},
		{
			name:    "a group update that changes nothing records nothing",
			given:   []any{commands.CreateGroup{Name: "Admins", Description: "d"}},
			when:    step{cmd: commands.UpdateGroup{Name: "admins", Description: ptr("d"), Attributes: &map[string][]string{}}},
			version: 1,
		},
		{
			name:  "a group update with a stale If-Match is refused",
			given: []any{admins, commands.UpdateGroup{Name: "admins", Description: ptr("x")}},
			when:  ifMatch(1, commands.UpdateGroup{Name: "admins", Description: ptr("y")}),
			err:   apperr.CodeVersionMismatch,
		},
		{
			name: "updating an unknown group is not found",
			when: step{cmd: commands.UpdateGroup{Name: "nobody", Description: ptr("x")}},
			err:  apperr.CodeNotFound,
		},
		{
			name:  "deleting a group records group.deleted and removes its memberships",
			given: []any{admins, createUser("jdoe", ""), createUser("john", ""), addMember("admins", "jdoe"), addMember("admins", "john")},
			when:  step{cmd: commands.DeleteGroup{Name: "ADMINS"}},
			then:  []event{{events.GroupDeletedType, "admins", 4, map[string]any{"deleted": true, "changes": []string{"name"}}}},
			also: func(t *testing.T, w *world, _ any) {
				groupHasNoMembers(t, w, "admins")
				if _, groups, err := w.real.UserMemberships(t.Context(), w.tenant, "jdoe"); err != nil || len(groups) != 0 {
					t.Errorf("jdoe still lists groups %v (%v)", groups, err)
				}
			},
		},
		{
			name:  "deleting a group with more members than one transaction holds removes every membership",
			given: append([]any{createGroup("big")}, usersInGroup(50, "big")...),
			when:  step{cmd: commands.DeleteGroup{Name: "big"}},
			then:  []event{{events.GroupDeletedType, "big", 52, map[string]any{"deleted": true}}},
			also: func(t *testing.T, w *world, _ any) {
				groupHasNoMembers(t, w, "big")
				g, err := w.real.LoadGroup(t.Context(), w.tenant, "big")
				if err != nil || g.CleanupPending {
					t.Errorf("tombstone still marked for clean-up (%v)", err)
				}
			},
		},
		{
			name:  "a deleted group can be created again: versions continue and the id is new",
			given: []any{admins, commands.DeleteGroup{Name: "admins"}},
			when:  step{cmd: createGroup("admins")},
			then:  []event{{events.GroupCreatedType, "admins", 3, map[string]any{"name": "admins", "deleted": false}}},
			also: func(t *testing.T, w *world, _ any) {
				first := w.record(events.KindGroup, "admins", 1).Payload.(*events.GroupCreated).Group.ID
				again := w.record(events.KindGroup, "admins", 3).Payload.(*events.GroupCreated).Group.ID
				if first == "" || first == again {
					t.Errorf("ids %q and %q, want two different ids", first, again)
				}
			},
		},
		{
			name:  "a deleted group is not found",
			given: []any{admins, commands.DeleteGroup{Name: "admins"}},
			when:  step{cmd: commands.DeleteGroup{Name: "admins"}},
			err:   apperr.CodeNotFound,
		},
		{
			name:  "a group delete with a stale If-Match is refused",
			given: []any{admins, commands.UpdateGroup{Name: "admins", Description: ptr("x")}},
			when:  ifMatch(1, commands.DeleteGroup{Name: "admins"}),
			err:   apperr.CodeVersionMismatch,
		},
	})
}

func TestMemberCommands(t *testing.T) {
	admins, jdoe := createGroup("Admins"), createUser("jdoe", "jdoe@example.com")
	runCases(t, []commandCase{
		{
			name:    "adding a user records group.member_added on the group",
			given:   []any{admins, jdoe},
			when:    step{cmd: addMember("ADMINS", "JDoe")},
			then:    []event{{events.GroupMemberAddedType, "admins", 2, map[string]any{"member": "jdoe", "name": "Admins", "changes": []string{"member"}}}},
			version: 2,
			also: func(t *testing.T, w *world, _ any) {
				if ok, err := w.real.IsMember(t.Context(), w.tenant, "admins", "jdoe"); err != nil || !ok {
					t.Errorf("jdoe is not a member (%v)", err)
				}
				if rev, groups, err := w.real.UserMemberships(t.Context(), w.tenant, "jdoe"); err != nil || rev != 1 || !slices.Equal(groups, []string{"admins"}) {
					t.Errorf("jdoe's memberships: rev %d, groups %v (%v)", rev, groups, err)
				}
			},
		},
		{
			name:    "adding a member again records nothing and answers the group's version",
			given:   []any{admins, jdoe, addMember("admins", "jdoe")},
			when:    step{cmd: addMember("admins", "jdoe")},
			version: 2,
		},
		{
			name:    "removing a member records group.member_removed",
			given:   []any{admins, jdoe, addMember("admins", "jdoe")},
			when:    step{cmd: commands.RemoveMember{Group: "admins", Username: "jdoe"}},
			then:    []event{{events.GroupMemberRemovedType, "admins", 3, map[string]any{"member": "jdoe"}}},
			version: 3,
			also:    func(t *testing.T, w *world, _ any) { noMemberships(t, w, "jdoe") },
		},
		{
			name:    "removing a user who is not a member records nothing",
			given:   []any{admins, jdoe},
			when:    step{cmd: commands.RemoveMember{Group: "admins", Username: "jdoe"}},
			version: 1,
		},
		{
			name:  "adding an unknown user is not found",
			given: []any{admins},
			when:  step{cmd: addMember("admins", "nobody")},
			err:   apperr.CodeNotFound,
		},
		{
			name:  "adding to an unknown group is not found",
			given: []any{jdoe},
			when:  step{cmd: addMember("nobody", "jdoe")},
			err:   apperr.CodeNotFound,
		},
		{
			name:  "adding a deleted user is not found",
			given: []any{admins, jdoe, commands.DeleteUser{Username: "jdoe"}},
			when:  step{cmd: addMember("admins", "jdoe")},
			err:   apperr.CodeNotFound,
		},
		{
			name:  "removing an unknown user is not found",
			given: []any{admins},
			when:  step{cmd: commands.RemoveMember{Group: "admins", Username: "nobody"}},
			err:   apperr.CodeNotFound,
		},
		{
			name:  "removing from an unknown group is not found",
			given: []any{jdoe},
			when:  step{cmd: commands.RemoveMember{Group: "nobody", Username: "jdoe"}},
			err:   apperr.CodeNotFound,
		},
		{
			name:  "adding a member with a stale If-Match of the group is refused",
			given: []any{admins, jdoe, commands.UpdateGroup{Name: "admins", Description: ptr("x")}},
			when:  ifMatch(1, addMember("admins", "jdoe")),
			err:   apperr.CodeVersionMismatch,
		},
		{
			name:  "adding a member with the group's current If-Match is accepted",
			given: []any{admins, jdoe},
			when:  ifMatch(1, addMember("admins", "jdoe")),
			then:  []event{{events.GroupMemberAddedType, "admins", 2, nil}},
		},
		{
			name:  "removing a member with a stale If-Match of the group is refused",
			given: []any{admins, jdoe, addMember("admins", "jdoe")},
			when:  ifMatch(1, commands.RemoveMember{Group: "admins", Username: "jdoe"}),
			err:   apperr.CodeVersionMismatch,
		},
	})
}

// testFingerprints fingerprints the requests of these tests.
var testFingerprints, _ = commands.NewFingerprinter([]byte("a fingerprint key of 32 bytes..."))

// idem is an Idempotency-Key of a request whose body is body.
func idem(key, body string, status int) *commands.Idempotency {
	return &commands.Idempotency{Key: key, Request: testFingerprints.Fingerprint("POST", "/p", []byte(body)), Status: status}
}

func TestIdempotencyKeys(t *testing.T) {
	key := func() string { return "acme/t/alice/" + uuid.NewString() }
	k1, k2, k3 := key(), key(), key()
	cases := []struct {
		name  string
		given []any
		when  step
		// replay is the version the replayed record names; 0 when the request must run.
		replay int64
		err    string
	}{
		{
			// The command API looks a key up before it runs a command; the store's own check
			// is what decides when two requests with one key race.
			name:   "a key that the same request took is answered with a replay by the store",
			given:  []any{step{cmd: createUser("jdoe", ""), idem: idem(k1, "h1", 201)}},
			when:   step{cmd: createUser("john", ""), idem: idem(k1, "h1", 201)},
			replay: 1,
		},
		{
			name:  "the same key with another request is refused",
			given: []any{step{cmd: createUser("jdoe", ""), idem: idem(k2, "h1", 201)}},
			when:  step{cmd: createUser("john", ""), idem: idem(k2, "h2", 201)},
			err:   apperr.CodeIdempotencyReused,
		},
		{
			name: "a request that changed nothing still takes its key",
			given: []any{createUser("jdoe", ""), commands.SetUserActive{Username: "jdoe"},
				step{cmd: commands.SetUserActive{Username: "jdoe"}, idem: idem(k3, "h1", 200)}},
			when:   step{cmd: commands.SetUserActive{Username: "jdoe"}, idem: idem(k3, "h1", 200)},
			replay: 2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.given(tc.given...)
			before := len(w.history())
			_, err := w.exec(t.Context(), tc.when)
			if n := len(w.history()); n != before {
				t.Errorf("%d records written, want none", n-before)
			}
			var re *commands.ReplayError
			switch {
			case tc.replay != 0:
				if !errors.As(err, &re) {
					t.Fatalf("got %v, want a replay", err)
				}
				if re.Record.Version != tc.replay || !testFingerprints.Fingerprint("POST", "/p", []byte("h1")).Matches(re.Record.RequestHash) || re.Record.Status != tc.when.idem.Status || re.Record.CommandID == "" {
					t.Errorf("replayed record %+v, want version %d", re.Record, tc.replay)
				}
			default:
				if apperr.CodeOf(err) != tc.err {
					t.Fatalf("got %v, want %s", err, tc.err)
				}
			}
		})
	}
}

// tenantWorld is the tenant side: the real tenant store on the shared tables.
type tenantWorld struct {
	t     *testing.T
	db    *dynamodb.Client
	names dynamo.Names
	store *dynamo.TenantStore
	box   *secrets.Box
}

func newTenantWorld(t *testing.T) *tenantWorld {
	t.Helper()
	local := dynamotest.Current(t)
	names := sharedTables(t, local)
	db := local.DynamoDB()
	box, err := secrets.NewLocal(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	return &tenantWorld{t: t, db: db, names: names, store: dynamo.NewTenantStore(db, names), box: box}
}

func (w *tenantWorld) exec(ctx context.Context, cmd any) (commands.TenantRecord, bool, error) {
	switch c := cmd.(type) {
	case commands.ProvisionTenant:
		return commands.NewProvisionTenantHandler(w.store, w.box, time.Now).Handle(ctx, c)
	case commands.UpdateKeycloak:
		rec, err := commands.NewUpdateKeycloakHandler(w.store, w.box, time.Now).Handle(ctx, c)
		return rec, false, err
	case commands.TenantRecord:
		// A row as an interrupted provisioning leaves it: written, tables not yet made.
		return c, false, w.store.PutTenant(ctx, c, 0)
	}
	w.t.Fatalf("no handler for %T", cmd)
	return commands.TenantRecord{}, false, nil
}

// row is the tenant's raw Config item.
func (w *tenantWorld) row(t *testing.T, system, tenant string) map[string]types.AttributeValue {
	t.Helper()
	out, err := w.db.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName: aws.String(w.names.Config()), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"system_id": &types.AttributeValueMemberS{Value: system}, "tenant_id": &types.AttributeValueMemberS{Value: tenant},
		},
	})
	if err != nil || out.Item == nil {
		t.Fatalf("tenant row %s/%s: %v", system, tenant, err)
	}
	return out.Item
}

func (w *tenantWorld) tablesExist(t *testing.T, system, tenant string) {
	t.Helper()
	for _, name := range []string{w.names.Commands(system, tenant), w.names.Users(system, tenant, 0), w.names.Activities(system, tenant, 0)} {
		out, err := w.db.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil || out.Table.TableStatus != types.TableStatusActive {
			t.Errorf("table %s is not ready: %v", name, err)
		}
	}
}

func TestTenantCommands(t *testing.T) {
	kc := func(secret string) *commands.KeycloakSettings {
		return &commands.KeycloakSettings{URL: "https://kc.example.com/", Realm: "acme", ClientID: "ssodir", ClientSecret: secret}
	}
	provision := func(tenant string, k *commands.KeycloakSettings) commands.ProvisionTenant {
		return commands.ProvisionTenant{System: "acme", Tenant: tenant, Keycloak: k}
	}
	cases := []struct {
		name  string
		given func(tenant string) []any
		when  func(tenant string) any
		// created is what the handler answers; err the expected error code.
		created bool
		err     string
		fields  []string
		also    func(t *testing.T, w *tenantWorld, tenant string, rec commands.TenantRecord)
	}{
		{
			name:    "a new tenant is provisioned: created, active, with its tables",
			when:    func(id string) any { return provision(id, kc("s3cr3t")) },
			created: true,
			also: func(t *testing.T, w *tenantWorld, id string, rec commands.TenantRecord) {
				if rec.Status != commands.TenantActive || rec.Keycloak == nil || rec.Keycloak.URL != "https://kc.example.com" || rec.Keycloak.OnDelete != "delete" {
					t.Errorf("record %+v", rec)
				}
				w.tablesExist(t, "acme", id)
				if got := s(w.row(t, "acme", id), "status"); got != commands.TenantActive {
					t.Errorf("stored status %q", got)
				}
			},
		},
		{
			name:    "the client secret is stored encrypted, never in clear",
			when:    func(id string) any { return provision(id, kc("plain-client-secret")) },
			created: true,
			also: func(t *testing.T, w *tenantWorld, id string, _ commands.TenantRecord) {
				row := w.row(t, "acme", id)
				if p, ok := findPlaintext(row, "plain-client-secret"); ok {
					t.Errorf("the row holds the secret in clear in %s", p)
				}
				pt, err := w.box.Decrypt(t.Context(), s(row, "client_secret"), "client_secret:acme/"+id)
				if err != nil || string(pt) != "plain-client-secret" {
					t.Errorf("client_secret decrypts to %q (%v)", pt, err)
				}
			},
		},
		{
			name:  "provisioning again with the same settings answers the tenant, not created",
			given: func(id string) []any { return []any{provision(id, kc("s3cr3t"))} },
			when:  func(id string) any { return provision(id, kc("s3cr3t")) },
		},
		{
			name:  "a tenant without Keycloak settings provisioned again without them is the same",
			given: func(id string) []any { return []any{provision(id, nil)} },
			when:  func(id string) any { return provision(id, nil) },
		},
		{
			name:  "provisioning again with another secret conflicts",
			given: func(id string) []any { return []any{provision(id, kc("s3cr3t"))} },
			when:  func(id string) any { return provision(id, kc("other")) },
			err:   apperr.CodeTenantExists,
		},
		{
			name:  "provisioning again with another realm conflicts",
			given: func(id string) []any { return []any{provision(id, kc("s3cr3t"))} },
			when: func(id string) any {
				k := kc("s3cr3t")
				k.Realm = "other"
				return provision(id, k)
			},
			err: apperr.CodeTenantExists,
		},
		{
			name:  "provisioning again with Keycloak settings where there were none conflicts",
			given: func(id string) []any { return []any{provision(id, nil)} },
			when:  func(id string) any { return provision(id, kc("s3cr3t")) },
			err:   apperr.CodeTenantExists,
		},
		{
			name: "an interrupted provisioning is finished by the next one",
			given: func(id string) []any {
				return []any{commands.TenantRecord{System: "acme", ID: id, Status: commands.TenantProvisioning}}
			},
			when: func(id string) any { return provision(id, nil) },
			also: func(t *testing.T, w *tenantWorld, id string, rec commands.TenantRecord) {
				w.tablesExist(t, "acme", id)
				if got := s(w.row(t, "acme", id), "status"); got != commands.TenantActive || rec.Status != commands.TenantActive {
					t.Errorf("status %q, answered %q", got, rec.Status)
				}
			},
		},
		{
			name: "invalid ids and Keycloak settings are reported by field",
			when: func(string) any {
				return commands.ProvisionTenant{System: "Acme!", Tenant: "-bad", Keycloak: &commands.KeycloakSettings{
					URL: "https://user:pw@kc.example.com", Realm: "a/b", ClientID: "", ClientSecret: strings.Repeat("s", 1025), OnDelete: "archive",
				}}
			},
			err: apperr.CodeValidationFailed,
			fields: []string{"keycloak.client_id", "keycloak.client_secret", "keycloak.on_delete", "keycloak.realm",
				"keycloak.url", "system", "tenant_id"},
		},
		{
			name:  "new Keycloak settings replace the old, with the secret encrypted",
			given: func(id string) []any { return []any{provision(id, kc("s3cr3t"))} },
			when: func(id string) any {
				return commands.UpdateKeycloak{System: "acme", Tenant: id, Keycloak: commands.KeycloakSettings{
					URL: "https://sso.example.com", Realm: "r2", ClientID: "c2", ClientSecret: "new-plain-secret", OnDelete: "disable",
				}}
			},
			also: func(t *testing.T, w *tenantWorld, id string, rec commands.TenantRecord) {
				row := w.row(t, "acme", id)
				if s(row, "keycloak_url") != "https://sso.example.com" || s(row, "keycloak_realm") != "r2" ||
					s(row, "client_id") != "c2" || s(row, "on_delete") != "disable" || s(row, "status") != commands.TenantActive {
					t.Errorf("row %v", row)
				}
				if _, ok := findPlaintext(row, "new-plain-secret"); ok {
					t.Error("the row holds the new secret in clear")
				}
				if pt, err := w.box.Decrypt(t.Context(), s(row, "client_secret"), "client_secret:acme/"+id); err != nil || string(pt) != "new-plain-secret" {
					t.Errorf("client_secret decrypts to %q (%v)", pt, err)
				}
				if rec.RowVersion != 3 {
					t.Errorf("row version %d, want 3 (created, activated, updated)", rec.RowVersion)
				}
			},
		},
		{
			name: "Keycloak settings of an unknown tenant are not found",
			when: func(id string) any {
				return commands.UpdateKeycloak{System: "acme", Tenant: id, Keycloak: *kc("s")}
			},
			err: apperr.CodeNotFound,
		},
		{
			name:  "invalid Keycloak settings are refused",
			given: func(id string) []any { return []any{provision(id, kc("s3cr3t"))} },
			when: func(id string) any {
				return commands.UpdateKeycloak{System: "acme", Tenant: id, Keycloak: commands.KeycloakSettings{URL: "kc.example.com", Realm: "r", ClientID: "c", ClientSecret: "s"}}
			},
			err:    apperr.CodeValidationFailed,
			fields: []string{"keycloak.url"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newTenantWorld(t)
			id := dynamotest.UniqueName("t")
			if tc.given != nil {
				for _, g := range tc.given(id) {
					if _, _, err := w.exec(t.Context(), g); err != nil {
						t.Fatalf("given %+v: %v", g, err)
					}
				}
			}
			rec, created, err := w.exec(t.Context(), tc.when(id))
			if tc.err != "" {
				if apperr.CodeOf(err) != tc.err {
					t.Fatalf("got %v, want %s", err, tc.err)
				}
				if len(tc.fields) > 0 {
					e, _ := apperr.As(err)
					var fields []string
					for _, f := range e.Fields {
						fields = append(fields, f.Field)
					}
					slices.Sort(fields)
					if !slices.Equal(fields, tc.fields) {
						t.Errorf("fields at fault %v, want %v", fields, tc.fields)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("when: %v", err)
			}
			if created != tc.created {
				t.Errorf("created %v, want %v", created, tc.created)
			}
			if tc.also != nil {
				tc.also(t, w, id, rec)
			}
		})
	}
}
