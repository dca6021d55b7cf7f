package projections_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
)

// throttlingDB is DynamoDB Local, except that the first BatchWriteItem writes only its
// first request and hands the rest back as unprocessed, as DynamoDB does under
// throttling (which DynamoDB Local never does).
type throttlingDB struct {
	*dynamodb.Client
	batches atomic.Int32
}

func (d *throttlingDB) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	if d.batches.Add(1) > 1 {
		return d.Client.BatchWriteItem(ctx, in, optFns...)
	}
	first := map[string][]types.WriteRequest{}
	rest := map[string][]types.WriteRequest{}
	for table, reqs := range in.RequestItems {
		first[table], rest[table] = reqs[:1], reqs[1:]
	}
	if _, err := d.Client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: first}, optFns...); err != nil {
		return nil, err
	}
	return &dynamodb.BatchWriteItemOutput{UnprocessedItems: rest}, nil
}

// TestApplyBatchWritesWhatDynamoDBLeftUnprocessed: given a DynamoDB that leaves part of a
// batch unprocessed, when ApplyBatch projects a page of records, then it retries until
// every activity item is written.
func TestApplyBatchWritesWhatDynamoDBLeftUnprocessed(t *testing.T) {
	t.Parallel()
	db := &throttlingDB{Client: client(t)}
	p := projections.New(db, projections.Options{Concurrency: 1})
	tables := newTables(t, db.Client)
	w := newWorld(t)
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		w.createUser(name, name+"@example.com", "", "")
	}
	if err := p.ApplyBatch(context.Background(), tables, w.log); err != nil {
		t.Fatal(err)
	}
	if n := db.batches.Load(); n < 2 {
		t.Fatalf("%d BatchWriteItem calls, want a retry", n)
	}
	s := takeSnapshot(t, db.Client, tables)
	assertActivities(t, s, w.log)
	if len(s.Users) != 5 {
		t.Errorf("%d read items, want 5", len(s.Users))
	}
}

// TestApplyRejectsRecordsThatDoNotAddUp: a record whose payload contradicts its envelope,
// or of a type without a projection, is an error (the projector dead-letters it), and
// nothing is written for it.
func TestApplyRejectsRecordsThatDoNotAddUp(t *testing.T) {
	t.Parallel()
	db := client(t)
	p := projections.New(db, projections.Options{})
	tables := newTables(t, db)
	w := newWorld(t)
	good := w.createUser("jdoe", "jdoe@example.com", "", "")

	otherKey := good
	otherKey.Key = "mallory"
	otherVersion := good
	otherVersion.Version = 7
	wrongKind := good
	wrongKind.Kind = events.KindGroup
	wrongPayload := good
	wrongPayload.Type = events.UserDeletedType
	unknown := good
	unknown.Type = "user.teleported" // no such event
	noID := good
	noID.EventID = ""
	member := w.addMemberRaw()

	for _, tc := range []struct {
		name   string
		e      events.Envelope
		tables projections.Tables
		want   string
	}{
		{"a payload for another user", otherKey, tables, "payload is user"},
		{"a payload of another version", otherVersion, tables, "payload is user"},
		{"a user payload in a group envelope", wrongKind, tables, "does not match"},
		{"a payload of another event type", wrongPayload, tables, "does not match"},
		{"an event type without a projection", unknown, tables, "no projection"},
		{"an event without an id", noID, tables, "missing event id"},
		{"a member event without a membership revision", member, tables, "membership revision"},
		{"no table names", good, projections.Tables{}, "tables not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Apply(context.Background(), tc.tables, tc.e)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
	if s := takeSnapshot(t, db, tables); len(s.Users)+len(s.Activities) != 0 {
		t.Errorf("rejected records wrote %d items", len(s.Users)+len(s.Activities))
	}
}

// TestApplyStatesWritesTheReadTableOnly: given events synthesised from state items (no
// event id, as a replay makes them when the history has expired), when ApplyStates
// projects them, then the read table is what Apply gives and there is no activity item.
func TestApplyStatesWritesTheReadTableOnly(t *testing.T) {
	t.Parallel()
	db := client(t)
	p := projections.New(db, projections.Options{})
	w := newWorld(t)
	w.createUser("jdoe", "jdoe@example.com", "Jane", "Doe")
	w.createGroup("Admins", "")
	w.addMember("admins", "jdoe")
	w.createUser("gone", "gone@example.com", "", "")
	w.addMember("admins", "gone")
	w.deleteUser("gone")

	want := newTables(t, db)
	applyAll(t, p, want, w.log)
	wantSnap := takeSnapshot(t, db, want)

	states := make([]events.Envelope, len(w.log))
	for i, e := range w.log {
		e.EventID = ""
		states[i] = e
	}
	got := newTables(t, db)
	if err := p.ApplyStates(context.Background(), got, states); err != nil {
		t.Fatal(err)
	}
	gotSnap := takeSnapshot(t, db, got)
	if d := diffItems("users", wantSnap.Users, gotSnap.Users); d != "" {
		t.Errorf("ApplyStates gives another read table than Apply:\n%s", d)
	}
	if len(gotSnap.Activities) != 0 {
		t.Errorf("ApplyStates wrote %d activity items, want none", len(gotSnap.Activities))
	}
}
