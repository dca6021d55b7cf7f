package keycloaksync

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
	"github.com/ssodir/ssodir/internal/secrets"
	"github.com/ssodir/ssodir/internal/streams"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// world is a tenant with a write model on DynamoDB Local, a realm on the Keycloak double,
// and the event-path handler between them.
type world struct {
	t       *testing.T
	db      *dynamodb.Client
	names   dynamo.Names
	tenant  commands.Tenant
	store   *dynamo.CommandStore
	box     *secrets.Box
	kc      *keycloaktest.Server
	handler *Handler
}

const testRealm = "acme"

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := t.Context()
	local := dynamotest.Current(t)
	db := local.DynamoDB()
	names := dynamo.Names{Prefix: dynamotest.UniqueName("kcs")}
	tenant := commands.Tenant{System: "acme", ID: "t1"}
	if err := dynamo.EnsureSharedTables(ctx, db, names, dynamo.TableSettings{}); err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	box, err := secrets.NewLocal(key)
	if err != nil {
		t.Fatal(err)
	}
	kc := keycloaktest.NewServer(t, keycloaktest.Config{})
	kc.AddRealm(testRealm, "ssodir-sync", "sync-secret")
	if err := kc.SetUnmanagedAttributes(testRealm, true); err != nil {
		t.Fatal(err)
	}
	secret, err := box.Encrypt(ctx, []byte("sync-secret"), "client_secret:acme/t1")
	if err != nil {
		t.Fatal(err)
	}
	tenants := dynamo.NewTenants(db, names)
	row := dynamo.Tenant{SystemID: tenant.System, TenantID: tenant.ID, Status: dynamo.TenantActive, KeycloakURL: kc.URL(),
		KeycloakRealm: testRealm, ClientID: "ssodir-sync", ClientSecret: secret, CommandsTable: names.Commands(tenant.System, tenant.ID)}
	if err := tenants.Put(ctx, row, 0); err != nil {
		t.Fatal(err)
	}
	// The tables after the row, as provisioning does: the row notes the stream.
	if err := dynamo.NewTenantStore(db, names).EnsureTables(ctx, tenant.System, tenant.ID); err != nil {
		t.Fatal(err)
	}
	reg := events.NewRegistry()
	store := dynamo.NewCommandStore(db, names, reg, 0)
	health, err := NewHealth(nil, "test", prometheus.NewRegistry(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(HandlerConfig{Realms: NewRealms(tenants, box, NewHTTPClient(), nil, zap.NewNop()), Secrets: box,
		Registry: reg, Store: store, Health: health, Park: streams.Park})
	return &world{t: t, db: db, names: names, tenant: tenant, store: store, box: box, kc: kc, handler: h}
}

// exec runs a command as the command API does.
func (w *world) exec(cmd any) { w.execWith(w.store, cmd) }

// execWith runs a command over store.
func (w *world) execWith(store commands.Store, cmd any) {
	w.t.Helper()
	ctx := w.t.Context()
	d := commands.Deps{Store: store, Now: time.Now, NewID: uuid.NewString}
	m := commands.Meta{Actor: "test", CommandID: uuid.NewString(), CorrelationID: uuid.NewString()}
	var err error
	switch c := cmd.(type) {
	case commands.CreateUser:
		_, err = commands.NewCreateUserHandler(d, w.box).Handle(ctx, w.tenant, c, m)
	case commands.UpdateUser:
		_, err = commands.NewUpdateUserHandler(d).Handle(ctx, w.tenant, c, m)
	case commands.ChangePassword:
		_, err = commands.NewChangePasswordHandler(d, w.box).Handle(ctx, w.tenant, c, m)
	case commands.SetUserActive:
		_, err = commands.NewSetUserActiveHandler(d).Handle(ctx, w.tenant, c, m)
	case commands.DeleteUser:
		_, err = commands.NewDeleteUserHandler(d).Handle(ctx, w.tenant, c, m)
	case commands.RenameUser:
		_, err = commands.NewRenameUserHandler(d).Handle(ctx, w.tenant, c, m)
	case commands.RenameGroup:
		_, err = commands.NewRenameGroupHandler(d).Handle(ctx, w.tenant, c, m)
	case commands.CreateGroup:
		_, err = commands.NewCreateGroupHandler(d).Handle(ctx, w.tenant, c, m)
	case commands.AddMember:
		_, err = commands.NewAddMemberHandler(d).Handle(ctx, w.tenant, c, m)
	case commands.RemoveMember:
		_, err = commands.NewRemoveMemberHandler(d).Handle(ctx, w.tenant, c, m)
	case commands.ChangeMembers:
		_, err = commands.NewChangeMembersHandler(d).Handle(ctx, w.tenant, c, m)
	default:
		w.t.Fatalf("no handler for %T", cmd)
	}
	if err != nil {
		w.t.Fatalf("%T: %v", cmd, err)
	}
}

// records are the history records of an aggregate, oldest first, as its stream delivers
// them.
func (w *world) records(aggregate string) []streams.Record {
	w.t.Helper()
	out, err := w.db.Query(w.t.Context(), &dynamodb.QueryInput{
		TableName:                 aws.String(w.names.Commands(w.tenant.System, w.tenant.ID)),
		KeyConditionExpression:    aws.String("id = :id AND begins_with(sk, :h)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": &types.AttributeValueMemberS{Value: aggregate}, ":h": &types.AttributeValueMemberS{Value: "config#"}},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		w.t.Fatal(err)
	}
	var recs []streams.Record
	for _, it := range out.Items {
		recs = append(recs, streams.Record{System: w.tenant.System, Tenant: w.tenant.ID, EventName: streams.EventInsert,
			Aggregate: aggregate, Keys: map[string]types.AttributeValue{"id": it["id"], "sk": it["sk"]}, NewImage: it})
	}
	return recs
}

func (w *world) apply(recs ...streams.Record) {
	w.t.Helper()
	for _, r := range recs {
		if err := w.handler.Apply(context.Background(), r); err != nil {
			w.t.Fatalf("apply %s: %v", r.Keys["sk"].(*types.AttributeValueMemberS).Value, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestEventPathWritesTheWriteModelsState: records delivered late, twice or out of order
// (a lease handover, a re-drive) never roll the realm back, never bring back what was
// deleted, and never send an old password.
func TestEventPathWritesTheWriteModelsState(t *testing.T) {
	t.Run("records of a user delivered newest first leave the newest state and password", func(t *testing.T) {
		w := newWorld(t)
		w.exec(commands.CreateUser{Username: "ann", Email: "ann@example.com", Password: ptr("first-password")})
		w.exec(commands.UpdateUser{Username: "ann", FirstName: ptr("Ann")})
		w.exec(commands.ChangePassword{Username: "ann", Password: "second-password"})
		w.exec(commands.SetUserActive{Username: "ann", Active: false})
		recs := w.records("user#ann")
		for i := len(recs) - 1; i >= 0; i-- {
			w.apply(recs[i])
		}
		u, ok := w.kc.UserByUsername(testRealm, "ann")
		if !ok || u.FirstName != "Ann" || u.Enabled || u.Attributes["ssodir_version"][0] != "4" {
			t.Fatalf("realm holds %+v, want the state of version 4", u)
		}
		if pw, _ := w.kc.LastPassword(testRealm, u.ID); pw.Value != "second-password" || pw.Sets != 1 {
			t.Fatalf("password %q set %d times, want the current one, once", pw.Value, pw.Sets)
		}
	})
	t.Run("a create delivered after the user was deleted and created again brings nothing back", func(t *testing.T) {
		w := newWorld(t)
		w.exec(commands.CreateUser{Username: "bob", Email: "bob@example.com"})
		first := w.records("user#bob")
		w.apply(first...)
		w.exec(commands.DeleteUser{Username: "bob"})
		w.exec(commands.CreateUser{Username: "bob", Email: "bob@new.example"})
		recs := w.records("user#bob")
		w.apply(recs[1:]...) // the delete and the new create
		w.apply(first[0])    // the old create, redelivered
		u, ok := w.kc.UserByUsername(testRealm, "bob")
		if !ok || u.Email != "bob@new.example" || len(w.kc.Users(testRealm)) != 1 {
			t.Fatalf("realm holds %+v (%d users), want only the new bob", u, len(w.kc.Users(testRealm)))
		}
	})
	t.Run("a membership added, then removed, delivered removal first, stays removed", func(t *testing.T) {
		w := newWorld(t)
		w.exec(commands.CreateUser{Username: "cid", Email: "cid@example.com"})
		w.exec(commands.CreateGroup{Name: "Staff"})
		w.apply(w.records("user#cid")...)
		w.apply(w.records("group#staff")...)
		w.exec(commands.AddMember{Group: "Staff", Username: "cid"})
		w.exec(commands.RemoveMember{Group: "Staff", Username: "cid"})
		recs := w.records("group#staff")
		w.apply(recs[2], recs[1])
		if u, _ := w.kc.UserByUsername(testRealm, "cid"); len(u.Groups) != 0 {
			t.Fatalf("cid is in %v, want no group", u.Groups)
		}
	})
}

// unwrittenMembers is the write model of a command API that dies right after recording a
// members change, before writing its membership items.
type unwrittenMembers struct{ commands.Store }

func (unwrittenMembers) WriteMembers(context.Context, commands.Tenant, commands.MembersWrite, func(context.Context) error) error {
	return errors.New("the process died")
}

// groupsOf is the names of the realm groups of username, sorted.
func (w *world) groupsOf(username string) []string {
	w.t.Helper()
	u, ok := w.kc.UserByUsername(testRealm, username)
	if !ok {
		w.t.Fatalf("no realm user %s", username)
	}
	var names []string
	for _, id := range u.Groups {
		for _, g := range w.kc.Groups(testRealm) {
			if g.ID == id {
				names = append(names, g.Name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// TestEventPathSyncsMembersChanges: every member a group.members_changed added or removed
// reaches the realm, also while the change's items are not written yet, and a record
// redelivered after a later change does not undo it.
func TestEventPathSyncsMembersChanges(t *testing.T) {
	w := newWorld(t)
	for _, u := range []string{"ann", "bob", "cid"} {
		w.exec(commands.CreateUser{Username: u, Email: u + "@example.com"})
		w.apply(w.records("user#" + u)...)
	}
	w.exec(commands.CreateGroup{Name: "Staff"})
	w.exec(commands.AddMember{Group: "Staff", Username: "cid"})
	w.apply(w.records("group#staff")...)

	// A change whose writer died: the write model's items are not there, its record is.
	w.execWith(unwrittenMembers{w.store}, commands.ChangeMembers{Group: "staff", Add: []string{"ann", "bob"}, Remove: []string{"cid"}})
	recs := w.records("group#staff")
	w.apply(recs[2])
	for user, want := range map[string][]string{"ann": {"Staff"}, "bob": {"Staff"}, "cid": nil} {
		if got := w.groupsOf(user); !slices.Equal(got, want) {
			t.Errorf("after the pending change %s is in %v, want %v", user, got, want)
		}
	}

	// The dead writer's lease runs out; the next command writes its items first.
	if _, err := w.db.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
		TableName:                 aws.String(w.names.Commands(w.tenant.System, w.tenant.ID)),
		Key:                       map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "group#staff"}, "sk": &types.AttributeValueMemberS{Value: "config"}},
		UpdateExpression:          aws.String("SET members_lease_until = :past"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":past": &types.AttributeValueMemberN{Value: "1"}},
	}); err != nil {
		t.Fatal(err)
	}
	w.exec(commands.ChangeMembers{Group: "staff", Remove: []string{"bob"}})
	recs = w.records("group#staff")
	w.apply(recs[3])
	w.apply(recs[2]) // the first change, redelivered
	for user, want := range map[string][]string{"ann": {"Staff"}, "bob": nil, "cid": nil} {
		if got := w.groupsOf(user); !slices.Equal(got, want) {
			t.Errorf("after the second change and a redelivery %s is in %v, want %v", user, got, want)
		}
	}
}
