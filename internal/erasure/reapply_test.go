package erasure_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/erasure/erasuretest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/streams"
)

// copyTable copies a table's items into a new table of the same spec, as a restore of a
// backup into a new table does.
func (st *stage) copyTable(t *testing.T, spec dynamo.TableSpec, from string) string {
	t.Helper()
	ctx := context.Background()
	if err := dynamo.EnsureTable(ctx, st.db, spec); err != nil {
		t.Fatal(err)
	}
	p := dynamodb.NewScanPaginator(st.db, &dynamodb.ScanInput{TableName: aws.String(from), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			if _, err := st.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: spec.Input.TableName, Item: it}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return aws.ToString(spec.Input.TableName)
}

// userLetter is a dead letter of a user's history record (its state holds id), written at.
func userLetter(t *testing.T, row dynamo.Tenant, username, id, seq string, at time.Time) deadletters.Letter {
	t.Helper()
	u := events.User{ID: id, Username: username, Email: username + "@example.org", FirstName: "F", Version: 2, CreatedAt: at, UpdatedAt: at}
	img, err := dynamo.EncodeRecord(events.Envelope{EventID: "dl-" + seq, Type: events.UserUpdatedType, SchemaVersion: events.SchemaVersion,
		Kind: events.KindUser, Key: username, Version: 2, Actor: "seed", OccurredAt: at, Payload: &events.UserUpdated{User: u}}, at, 0)
	if err != nil {
		t.Fatal(err)
	}
	rec := streams.Record{System: row.SystemID, Tenant: row.TenantID, Table: row.CommandsTable, SequenceNumber: seq, Aggregate: dynamo.UserID(username),
		EventName: streams.EventInsert, Keys: map[string]types.AttributeValue{"id": img["id"], "sk": img["sk"]}, NewImage: img}
	return deadletters.Letter{System: row.SystemID, Tenant: row.TenantID, Table: row.CommandsTable, SequenceNumber: seq, Aggregate: rec.Aggregate,
		Attempts: 3, Reason: "failed", At: at, Record: rec}
}

// TestReapplyCleansEveryRestoredTable is a restore drill of the tenant's tables and of the
// stage's shared ones (Idempotency-Key records, dead letters, the sync status): copied
// before the erasure, which then runs; a later user takes the name and leaves records in
// the shared tables. The re-application cleans every restored copy of the erased person,
// the erasure's pointer item included, and leaves the later user's records alone.
func TestReapplyCleansEveryRestoredTable(t *testing.T) {
	st := newStage(t)
	ctx := context.Background()
	row := st.tenant(t, "s", "drill")
	at := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	erasureID := "00000000-0000-0000-0000-0000000000d1"
	ev := st.erasee(t, row, erasuretest.Spec{Username: "erasee", History: 5, Groups: 2, Others: 30, At: at}, erasureID)

	// The shared tables name the person: a dead letter of their aggregate, a group's
	// membership parked, the sync status's last error.
	for _, spec := range []dynamo.TableSpec{dynamo.StreamTables("unused", st.names.DeadLetters())[1], dynamo.KeycloakSyncStatusTable(st.names.KeycloakSyncStatus())} {
		if err := dynamo.EnsureTable(ctx, st.db, spec); err != nil {
			t.Fatal(err)
		}
	}
	projDL := deadletters.New(st.db, st.names.DeadLetters(), "projector")
	if err := projDL.Put(ctx, userLetter(t, row, "erasee", "id-erasee", "100", at)); err != nil {
		t.Fatal(err)
	}
	member := dynamo.MemberItem("erasee-g0", "erasee", "id-erasee", 1, 2, dynamo.FormatTime(at))
	if err := projDL.Put(ctx, deadletters.Letter{System: row.SystemID, Tenant: row.TenantID, Table: row.CommandsTable, SequenceNumber: "101",
		Aggregate: "group#erasee-g0", Attempts: 1, Reason: "failed", At: at, Record: streams.Record{System: row.SystemID, Tenant: row.TenantID,
			Table: row.CommandsTable, SequenceNumber: "101", Aggregate: "group#erasee-g0", EventName: streams.EventInsert,
			Keys: map[string]types.AttributeValue{"id": member["id"], "sk": member["sk"]}, NewImage: member}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(st.names.KeycloakSyncStatus()), Item: map[string]types.AttributeValue{
		"system_id": s(row.SystemID), "tenant_id": s(row.TenantID), "last_error": s("user erasee (id-erasee): 409 from Keycloak"),
	}}); err != nil {
		t.Fatal(err)
	}

	// The restore drill: every table that can hold the person, copied before the erasure.
	restored := erasure.Restored{
		CommandsTable:    st.copyTable(t, dynamo.CommandsTable(row.CommandsTable+"_r"), row.CommandsTable),
		UsersTable:       st.copyTable(t, dynamo.UsersTable(row.UsersTable+"_r"), row.UsersTable),
		ActivitiesTable:  st.copyTable(t, dynamo.ActivitiesTable(row.ActivitiesTable+"_r"), row.ActivitiesTable),
		IdempotencyTable: st.copyTable(t, dynamo.IdempotencyTable(st.names.Idempotency()+"_r"), st.names.Idempotency()),
		DeadLettersTable: st.copyTable(t, dynamo.StreamTables("unused", st.names.DeadLetters()+"_r")[1], st.names.DeadLetters()),
		SyncStatusTable:  st.copyTable(t, dynamo.KeycloakSyncStatusTable(st.names.KeycloakSyncStatus()+"_r"), st.names.KeycloakSyncStatus()),
	}
	// A restore from the erasure's middle brings its pointer item back.
	if _, err := st.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(restored.CommandsTable), Item: map[string]types.AttributeValue{
		"id": s("erasure#" + erasureID), "sk": s("erasure"), "username": s("erasee"), "previous_id": s("id-erasee"),
	}}); err != nil {
		t.Fatal(err)
	}

	x := erasure.NewEraser(st.db, st.names, st.tenants, events.NewRegistry(), erasure.Options{Settle: time.Millisecond})
	run(t, st, x, row, ev)
	if err := x.Ledger().MarkDone(ctx, row.SystemID, row.TenantID, erasureID, commands.PlaceKeycloak); err != nil {
		t.Fatal(err)
	}
	if e, err := x.Ledger().Get(ctx, row.SystemID, row.TenantID, erasureID); err != nil || e.CompletedAt == nil {
		t.Fatalf("the erasure is not done: %+v, %v", e, err)
	}

	// A later user of the name, after the erasure: their records in the (restored) shared
	// tables are theirs, not the erased person's.
	later := time.Now().UTC().Add(time.Second)
	restoredDL := deadletters.New(st.db, restored.DeadLettersTable, "projector")
	if err := restoredDL.Put(ctx, userLetter(t, row, "erasee", "id-later", "900", later)); err != nil {
		t.Fatal(err)
	}
	laterKey := row.SystemID + "/" + row.TenantID + "/later"
	if _, err := st.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(restored.IdempotencyTable), Item: map[string]types.AttributeValue{
		"key": s(laterKey), "agg_key": s("erasee"), "kind": s(string(events.KindUser)), "created_at": s(dynamo.FormatTime(later)),
	}}); err != nil {
		t.Fatal(err)
	}

	res, err := x.Reapply(ctx, row.SystemID, row.TenantID, restored)
	if err != nil {
		t.Fatal(err)
	}
	if res.Users != 1 {
		t.Errorf("reapply found %d erased users again, want 1", res.Users)
	}

	canaries := []string{`"erasee"`, `\"erasee\"`, "user#erasee", "member#erasee", "erasee@", `"id-erasee"`, `id-erasee\"`, "(id-erasee)", "erasure#" + erasureID}
	for _, table := range []string{restored.CommandsTable, restored.UsersTable, restored.ActivitiesTable, restored.IdempotencyTable, restored.DeadLettersTable, restored.SyncStatusTable} {
		for _, it := range st.contents(t, table) {
			if strings.Contains(it, "id-later") || strings.Contains(it, laterKey) || strings.Contains(it, `"sequence_number":"900"`) {
				continue // the later user's (their dead letter's marker too)
			}
			for _, c := range canaries {
				if strings.Contains(it, c) {
					t.Errorf("%s still names the erased person (%s): %.300s", table, c, it)
					break
				}
			}
		}
	}
	laterLeft := 0
	for _, table := range []string{restored.IdempotencyTable, restored.DeadLettersTable} {
		for _, it := range st.contents(t, table) {
			if strings.Contains(it, "id-later") || strings.Contains(it, laterKey) {
				laterLeft++
			}
		}
	}
	// The later user's Idempotency-Key record, their dead letter (and its attempt-free
	// entry only: the marker names no one).
	if laterLeft < 2 {
		t.Errorf("the later user's records left in the restored shared tables: %d, want their Idempotency-Key record and dead letter", laterLeft)
	}
}

// TestADefaultErasureTakesTheIncarnationsOwnDeadLettersAndKeys: without all_incarnations
// an erasure takes, of the user's aggregate, the dead letters holding the erased id and
// the Idempotency-Key records made since the incarnation's creation; an earlier person's
// under the same name (another id, an earlier time) stay.
func TestADefaultErasureTakesTheIncarnationsOwnDeadLettersAndKeys(t *testing.T) {
	st := newStage(t)
	ctx := context.Background()
	row := st.tenant(t, "s", "inc")
	for _, spec := range []dynamo.TableSpec{dynamo.StreamTables("unused", st.names.DeadLetters())[1], dynamo.KeycloakSyncStatusTable(st.names.KeycloakSyncStatus())} {
		if err := dynamo.EnsureTable(ctx, st.db, spec); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	ev := st.erasee(t, row, erasuretest.Spec{Username: "erasee", History: 3, Groups: 1, At: at}, "00000000-0000-0000-0000-0000000000e1")
	dl := deadletters.New(st.db, st.names.DeadLetters(), "projector")
	for _, l := range []deadletters.Letter{
		userLetter(t, row, "erasee", "id-earlier", "10", at.Add(-24*time.Hour)),
		userLetter(t, row, "erasee", "id-erasee", "20", at.Add(time.Minute)),
	} {
		if err := dl.Put(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	for key, created := range map[string]time.Time{"earlier": at.Add(-2 * time.Hour), "erased": at.Add(time.Minute)} {
		if _, err := st.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(st.names.Idempotency()), Item: map[string]types.AttributeValue{
			"key": s(row.SystemID + "/" + row.TenantID + "/" + key), "agg_key": s("erasee"), "kind": s(string(events.KindUser)), "created_at": s(dynamo.FormatTime(created)),
		}}); err != nil {
			t.Fatal(err)
		}
	}
	x := erasure.NewEraser(st.db, st.names, st.tenants, events.NewRegistry(), erasure.Options{Settle: time.Millisecond})
	run(t, st, x, row, ev)

	letters := strings.Join(st.contents(t, st.names.DeadLetters()), "\n")
	if !strings.Contains(letters, "id-earlier") {
		t.Error("the earlier person's dead letter under the name was dropped")
	}
	if strings.Contains(letters, "id-erasee") {
		t.Error("the erased incarnation's dead letter is left")
	}
	keys := strings.Join(st.contents(t, st.names.Idempotency()), "\n")
	if !strings.Contains(keys, row.TenantID+"/earlier") {
		t.Error("the earlier person's Idempotency-Key record was deleted")
	}
	if strings.Contains(keys, row.TenantID+"/erased") {
		t.Error("the erased incarnation's Idempotency-Key record is left")
	}
}
