package keycloaksync

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/expiry"
)

// An expiry reaches Keycloak as the ordinary removal it is: the renewal syncs nothing but
// the group, and the scheduler's removal takes the member out of the realm's group.
func TestExpiryRemovesTheKeycloakMembership(t *testing.T) {
	w := newWorld(t)
	w.exec(commands.CreateUser{Username: "cid", Email: "cid@example.com"})
	w.exec(commands.CreateGroup{Name: "Staff"})
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	w.exec(commands.AddMember{Group: "Staff", Username: "cid", Expiry: &commands.ExpiryChange{At: &at}})
	renewed := at.Add(time.Hour)
	w.exec(commands.AddMember{Group: "Staff", Username: "cid", Expiry: &commands.ExpiryChange{At: &renewed}})
	w.apply(w.records("user#cid")...)
	w.apply(w.records("group#staff")...)
	if got := w.groupsOf("cid"); !slices.Equal(got, []string{"Staff"}) {
		t.Fatalf("cid is in %v before the expiry, want [Staff]", got)
	}

	later := func() time.Time { return renewed.Add(time.Second) }
	s := &expiry.Scheduler{Due: dynamo.NewExpiries(w.db, w.names), Find: w.store, Now: later,
		Remove: commands.NewRemoveMemberHandler(commands.Deps{Store: w.store, Now: later, NewID: uuid.NewString})}
	if res, err := s.Sweep(t.Context()); err != nil || res.Done != 2 {
		t.Fatalf("sweep = %+v, %v; want both entries (the renewed one stale) done", res, err)
	}
	recs := w.records("group#staff")
	w.apply(recs[len(recs)-1])
	if got := w.groupsOf("cid"); len(got) != 0 {
		t.Fatalf("cid is in %v after the expiry, want no group", got)
	}
}
