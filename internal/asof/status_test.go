package asof_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ssodir/ssodir/internal/asof"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
)

// countingDB counts the index's UpdateItem calls.
type countingDB struct {
	*dynamodb.Client
	updates atomic.Int64
}

func (c *countingDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.updates.Add(1)
	return c.Client.UpdateItem(ctx, in, o...)
}

// TestAnUpdateThatKeepsTheStatusWritesNoStatus: a user.updated whose changes do not name
// is_active (a profile edit) writes nothing into the index, while one that does, and one
// without changes (a replay's, from the write model's state), write the status; the
// report's periods are the same as if every update had written it, in order and shuffled.
func TestAnUpdateThatKeepsTheStatusWritesNoStatus(t *testing.T) {
	ctx := context.Background()
	h := story()
	alice := user("u-alice", "alice", h.at(1))
	alice.Email = "alice@new.example"
	h.add(2.2, events.KindUser, "alice", "admin", &events.UserUpdated{User: alice})
	h.es[len(h.es)-1].Changes = map[string]events.Change{"email": {Old: nil, New: "alice@new.example"}}
	profileEdit := h.es[len(h.es)-1]
	alice.IsActive = false
	h.add(2.5, events.KindUser, "alice", "scim:okta", &events.UserUpdated{User: alice})
	h.es[len(h.es)-1].Changes = map[string]events.Change{"is_active": {Old: true, New: false}}
	deactivation := h.es[len(h.es)-1]
	alice.IsActive = true
	h.add(3.5, events.KindUser, "alice", "admin", &events.UserUpdated{User: alice})
	fromState := h.es[len(h.es)-1] // no changes: written

	db := &countingDB{Client: dynamotest.Current(t).DynamoDB()}
	_, _, table := newTable(t)
	x := asof.New(db)
	for _, c := range []struct {
		name   string
		e      events.Envelope
		writes int64
	}{{"a profile edit", profileEdit, 0}, {"a deactivation", deactivation, 1}, {"an update without changes", fromState, 1}} {
		before := db.updates.Load()
		if err := x.Apply(ctx, table, c.e); err != nil {
			t.Fatal(err)
		}
		if got := db.updates.Load() - before; got != c.writes {
			t.Errorf("%s: %d index writes, want %d", c.name, got, c.writes)
		}
	}

	want := "Eng/g-1 alice/u-alice +2 admin -4 scim:okta [active 1-2.5, inactive 2.5-3.5, active 3.5-]"
	for _, order := range []string{"in order", "shuffled twice"} {
		t.Run(order, func(t *testing.T) {
			_, _, table := newTable(t)
			applyIn(t, x, table, h.es, order, 5)
			rows := report(t, h, table, 0, 10, 3)
			found := false
			for _, r := range rows {
				found = found || r == want
			}
			if !found {
				t.Errorf("report rows %q, want one %q", rows, want)
			}
		})
	}
}
