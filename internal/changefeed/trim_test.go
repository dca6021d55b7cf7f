package changefeed_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
)

// bigAttributes are a user's attributes of about n bytes: a user near DynamoDB's item limit.
func bigAttributes(fill byte, n int) map[string][]string {
	attrs := map[string][]string{}
	for i := 0; n > 0; i++ {
		v := strings.Repeat(string(fill), min(n, 30_000))
		attrs["a"+string(rune('a'+i))] = []string{v}
		n -= len(v)
	}
	return attrs
}

// A user of 300 KB (within the 400 KB item limit) whose attributes are all replaced: the
// change set holds old and new, so the CloudEvent is over 600 KB. It goes into the feed
// trimmed, and its record does not dead-letter.
func TestAChangeOverTheItemLimitGoesInTrimmed(t *testing.T) {
	t.Parallel()
	before := events.User{ID: "uid-big", Username: "Big.User", Version: 2, Attributes: bigAttributes('x', 300_000)}
	after := before
	after.Version, after.Attributes = 3, bigAttributes('y', 300_000)
	env := events.Envelope{EventID: "ev-big", Type: events.UserUpdatedType, Kind: events.KindUser, Key: "big.user", Version: 3,
		Actor: "bootstrap", OccurredAt: time.Now(), Payload: &events.UserUpdated{User: after},
		Changes: map[string]events.Change{"attributes": {Old: before.Attributes, New: after.Attributes}}}
	c, err := changefeed.FromEnvelope("s1", "t1", env)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Event) > changefeed.MaxEventBytes {
		t.Fatalf("the event is %d bytes, over %d", len(c.Event), changefeed.MaxEventBytes)
	}
	db, table := dynamotest.Current(t).DynamoDB(), feedTable(t)
	a := changefeed.NewAppender(db, table, changefeed.Options{})
	if err := a.Append(context.Background(), c); err != nil {
		t.Fatalf("append a change of a user near the item limit: %v", err)
	}
	page, err := changefeed.NewReader(db, table, 0, nil).Read(context.Background(), "s1", "t1", changefeed.Position{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 1 {
		t.Fatalf("the feed has %d changes, want 1", len(page.Events))
	}
	var got struct {
		ID      string          `json:"id"`
		Type    string          `json:"type"`
		Subject string          `json:"subject"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(page.Events[0], &got); err != nil {
		t.Fatal(err)
	}
	want := `{"id":"uid-big","version":3,"actor":"bootstrap","truncated":true,"href":"/v1/systems/s1/tenants/t1/users/big.user"}`
	if got.ID != "ev-big" || got.Type != "io.ssodir.user.updated" || got.Subject != "user:big.user" || string(got.Data) != want {
		t.Fatalf("the trimmed change is %s %s %s %s, want data %s", got.ID, got.Type, got.Subject, got.Data, want)
	}
}

func TestTrimLeavesAnEventWithinTheLimitAlone(t *testing.T) {
	raw := []byte(`{"id":"e","subject":"group:a b","source":"/v1/systems/s/tenants/t","data":{"id":"g","version":1,"actor":"x","state":{"k":"v"}}}`)
	got, err := changefeed.Trim(raw, len(raw))
	if err != nil || string(got) != string(raw) {
		t.Fatalf("Trim(within) = %s, %v", got, err)
	}
	got, err = changefeed.Trim(raw, len(raw)-1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), `"data":{"id":"g","version":1,"actor":"x","truncated":true,"href":"/v1/systems/s/tenants/t/groups/a%20b"}`) {
		t.Fatalf("Trim(over) = %s", got)
	}
}
