package keycloaksync

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/ssodir/ssodir/internal/commands"
)

// deadUserMover is the command store, except that MoveUserMemberships dies after its
// first request: the process that renamed the user died in the middle of the move.
type deadUserMover struct{ commands.Store }

func (s deadUserMover) MoveUserMemberships(ctx context.Context, t commands.Tenant, m commands.UserMove, before func(context.Context) error) error {
	var n atomic.Int64
	return s.Store.MoveUserMemberships(ctx, t, m, func(ctx context.Context) error {
		if n.Add(1) > 1 {
			return errors.New("the process died")
		}
		return before(ctx)
	})
}

// TestARenameInManyGroupsKeepsThemAll: a user in 45 groups renamed by a process that died
// in the middle of the move (most memberships still under the old name). The Keycloak
// user is renamed in place and is in all 45 groups, whose membership records the sync
// sees only after the rename: the write model answers from the rename's record meanwhile.
func TestARenameInManyGroupsKeepsThemAll(t *testing.T) {
	w := newWorld(t)
	w.exec(commands.CreateUser{Username: "ann", Email: "ann@example.com"})
	w.apply(w.records("user#ann")...)
	for i := range 45 {
		g := fmt.Sprintf("g%02d", i)
		w.exec(commands.CreateGroup{Name: g})
		w.exec(commands.AddMember{Group: g, Username: "ann"})
		w.apply(w.records("group#" + g)[0]) // the group; its membership record is not sent
	}
	before, ok := w.kc.UserByUsername(testRealm, "ann")
	if !ok || len(before.Groups) != 0 {
		t.Fatalf("before the rename the realm holds %+v", before)
	}
	if err := w.kc.AllowEditUsername(testRealm, true); err != nil {
		t.Fatal(err)
	}
	w.execWith(deadUserMover{w.store}, commands.RenameUser{Username: "ann", NewUsername: "ann.smith"})
	w.apply(w.records("user#ann.smith")...)
	users := w.kc.Users(testRealm)
	if len(users) != 1 || users[0].ID != before.ID || users[0].Username != "ann.smith" {
		t.Fatalf("after the rename the realm holds %+v, want the Keycloak user %s renamed in place", users, before.ID)
	}
	if len(users[0].Groups) != 45 {
		t.Errorf("groups after the rename: %d, want 45", len(users[0].Groups))
	}
}
