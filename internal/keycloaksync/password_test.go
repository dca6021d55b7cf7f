package keycloaksync

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/esm"
	"github.com/ssodir/ssodir/internal/esm/esmtest"
	"github.com/ssodir/ssodir/internal/keycloak"
	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
	"github.com/ssodir/ssodir/internal/streams"
)

// resets counts the reset-password requests the realm received.
func (w *world) resets() int {
	n := 0
	for _, r := range w.kc.AdminRequests() {
		if r.Method == http.MethodPut && strings.HasSuffix(r.Path, "/reset-password") {
			n++
		}
	}
	return n
}

// putTimes puts the history record of the aggregate's version on the pipe's stream n times
// in a row: deliveries again, as after a lease handover or a restart.
func (p *pipe) putTimes(n int, aggregate string, version int64) {
	p.w.t.Helper()
	for _, r := range p.w.records(aggregate) {
		want := r.Keys["sk"].(*dtypes.AttributeValueMemberS).Value == dynamo.HistorySK(version)
		for i := 0; want && i < n; i++ {
			p.f.Put(p.arn, "s1", stypes.Record{EventName: stypes.OperationTypeInsert, Dynamodb: &stypes.StreamRecord{
				Keys: toStreamAttrs(r.Keys), NewImage: toStreamAttrs(r.NewImage)}})
		}
	}
}

func (w *world) realmUser(username string) keycloaktest.User {
	u, _ := w.kc.UserByUsername(testRealm, username)
	return u
}

// TestAPasswordChangeDeliveredFiveTimesIsSentOnce (the long-running consumer): a realm with
// a password-history policy refuses a reset to the current password; the record of a
// change delivered again sends nothing, so it never becomes a dead letter, nor do the
// user's later records wait behind one.
func TestAPasswordChangeDeliveredFiveTimesIsSentOnce(t *testing.T) {
	w := newWorld(t)
	if err := w.kc.SetPasswordHistory(testRealm, 3); err != nil {
		t.Fatal(err)
	}
	p := w.startPipe(time.Hour, 3)
	w.exec(commands.CreateUser{Username: "ann", Email: "ann@example.com", Password: ptr("first passphrase")})
	w.exec(commands.UpdateUser{Username: "ann", FirstName: ptr("Ann")})
	p.putTimes(5, "user#ann", 1)
	p.putTimes(1, "user#ann", 2)
	waitFor(t, 60*time.Second, "six records handled", func() bool { return p.acked.Load() == 6 })
	if n := w.resets(); n != 1 {
		t.Fatalf("%d reset-password calls for a create delivered five times, want 1", n)
	}

	w.exec(commands.ChangePassword{Username: "ann", Password: "second passphrase"})
	w.exec(commands.SetUserActive{Username: "ann", Active: false})
	p.putTimes(5, "user#ann", 3)
	p.putTimes(1, "user#ann", 4)
	waitFor(t, 60*time.Second, "twelve records handled", func() bool { return p.acked.Load() == 12 })
	u := w.realmUser("ann")
	if pw, _ := w.kc.LastPassword(testRealm, u.ID); pw.Value != "second passphrase" || w.resets() != 2 || u.Enabled {
		t.Fatalf("password %q after %d reset-password calls, want the second one after 2", pw.Value, w.resets())
	}
	if v := u.Attributes[keycloak.AttrSsodirPasswordVersion]; len(v) != 1 || v[0] != "3" {
		t.Errorf("ssodir_password_version %v, want [3]", v)
	}
	if dls := p.deadLetters(); len(dls) != 0 {
		t.Errorf("dead letters %+v, want none", dls)
	}
}

// TestLambdaModeSendsAPasswordOncePerChange: in Lambda mode a batch comes again whole
// after a failure (ESM restarts the shard at the failed record) or on a new player; five
// plays of the stream send each password once, and a reset whose answer was lost — it
// landed — is sent once more, which the realm's history policy refuses, and the record
// succeeds all the same instead of becoming a dead letter.
func TestLambdaModeSendsAPasswordOncePerChange(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	if err := w.kc.SetPasswordHistory(testRealm, 3); err != nil {
		t.Fatal(err)
	}
	leases, dlqTable := dynamotest.UniqueName("leases"), dynamotest.UniqueName("dlq")
	if err := streams.EnsureTables(ctx, w.db, leases, dlqTable); err != nil {
		t.Fatal(err)
	}
	dlq := deadletters.New(w.db, dlqTable, "keycloak-sync")
	batch := esm.New(esm.Config{Labels: w.names.ParseCommands, DeadLetters: dlq, Handle: w.handler.HandleMessage,
		MaxAttempts: 2, Backoff: 10 * time.Millisecond})
	out, err := w.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(w.names.Commands(w.tenant.System, w.tenant.ID))})
	if err != nil {
		t.Fatal(err)
	}
	play := func(times int) {
		t.Helper()
		for range times {
			p := &esmtest.Player{Streams: dynamotest.Current(t).Streams(), StreamARN: aws.ToString(out.Table.LatestStreamArn), Invoke: batch.Handle}
			if err := p.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			if fs := p.Failures(); len(fs) != 0 {
				t.Fatalf("ESM gave up on %+v", fs)
			}
		}
	}

	w.exec(commands.CreateUser{Username: "ann", Email: "ann@example.com", Password: ptr("first passphrase")})
	play(1)
	ann := w.realmUser("ann")
	w.exec(commands.ChangePassword{Username: "ann", Password: "second passphrase"})
	// The change's reset lands, but its answer never comes back.
	w.kc.Inject(keycloaktest.Fault{Method: http.MethodPut, PathPrefix: keycloaktest.AdminPath(testRealm, "/users/"+ann.ID+"/reset-password"),
		Hang: true, Apply: true})
	play(5)
	u := w.realmUser("ann")
	if pw, _ := w.kc.LastPassword(testRealm, u.ID); pw.Value != "second passphrase" {
		t.Fatalf("password %q, want the second", pw.Value)
	}
	// One for the create, the change's lost one, and its one resend.
	if n := w.resets(); n != 3 {
		t.Errorf("%d reset-password calls, want 3", n)
	}
	if v := u.Attributes[keycloak.AttrSsodirPasswordVersion]; len(v) != 1 || v[0] != "2" {
		t.Errorf("ssodir_password_version %v, want [2]", v)
	}
	dls, err := dlq.List(ctx, deadletters.Filter{})
	if err != nil || len(dls) != 0 {
		t.Errorf("dead letters %+v, %v; want none", dls, err)
	}
}
