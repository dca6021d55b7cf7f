package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ssodir/ssodir/client"
)

// TestEventsFollowsTheChangeFeed: the iterator follows the feed (waiting for the projector),
// gives a user's changes once and in order with its id and state, no password, and a
// walk resumed from the last change's cursor starts after it.
func TestEventsFollowsTheChangeFeed(t *testing.T) {
	t.Parallel()
	_, ten := newTenant(t)
	ctx := context.Background()
	u, err := ten.CreateUser(ctx, client.NewUser{Username: "alice", Email: "alice@example.com", Password: "correct horse"})
	if err != nil {
		t.Fatal(err)
	}
	first := "Alice"
	if _, err := ten.UpdateUser(ctx, "alice", client.UserPatch{FirstName: &first}); err != nil {
		t.Fatal(err)
	}

	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var got []client.EventAt
	for at, err := range ten.Events(wctx, client.EventsOptions{Limit: 1, Follow: true, Wait: 5 * time.Second}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, at)
		if len(got) == 2 {
			break
		}
	}
	if len(got) != 2 {
		t.Fatalf("followed %d changes, want 2", len(got))
	}
	for i, want := range []struct {
		typ     string
		version int64
	}{{"io.ssodir.user.created", 1}, {"io.ssodir.user.updated", 2}} {
		ev := got[i].Event
		if ev.Type != want.typ || ev.Data.ID != u.ID || ev.Data.Version != want.version || ev.Subject != "user:alice" ||
			ev.SpecVersion != "1.0" || ev.Source != "/v1/systems/acme/tenants/eu" {
			t.Errorf("change %d = %+v, want %s of %s v%d", i, ev, want.typ, u.ID, want.version)
		}
		if bytes.Contains(ev.Data.State, []byte("password")) {
			t.Errorf("change %d shows a password: %s", i, ev.Data.State)
		}
	}
	var state client.User
	if err := json.Unmarshal(got[1].Event.Data.State, &state); err != nil || state.FirstName != "Alice" || state.Email != "alice@example.com" {
		t.Errorf("state after the update: %+v %v", state, err)
	}
	if _, ok := got[1].Event.Data.Changes["first_name"]; !ok {
		t.Errorf("the update's changes %v hold no first_name", got[1].Event.Data.Changes)
	}
	for at, err := range ten.Events(ctx, client.EventsOptions{After: got[1].Cursor}) {
		t.Errorf("a walk from the last cursor gave %+v %v", at.Event, err)
	}
}
