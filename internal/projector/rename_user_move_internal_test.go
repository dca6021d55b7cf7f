package projector

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/projections"
)

// deadUserMoverStore is the command store, except that its MoveUserMemberships dies after
// a few requests: the process that renamed the user died in the middle of the move.
type deadUserMoverStore struct {
	commands.Store
	requests int64
}

func (s deadUserMoverStore) MoveUserMemberships(ctx context.Context, t commands.Tenant, m commands.UserMove, before func(context.Context) error) error {
	return s.Store.MoveUserMemberships(ctx, t, m, diesAfter(s.requests, before))
}

// TestReplayRebuildsARenameInManyGroupsMidMove: a user in 150 groups renamed by a process
// that died in the middle of the move, then the old name created again (which finishes
// the move first, once the mover's lease ran out) and a member removed from one group: a
// replay of the log builds every membership under the new username, the old name's as
// tombstones, and passes the verification against the write model.
func TestReplayRebuildsARenameInManyGroupsMidMove(t *testing.T) {
	ctx := context.Background()
	f := newRebuildFixtureOn(t, dynamotest.Private(t))
	f.run(t, commands.CreateUser{Username: "ann"})
	groups := make([]string, 150)
	for i := range groups {
		groups[i] = fmt.Sprintf("g%03d", i)
		f.run(t, commands.CreateGroup{Name: groups[i]}, commands.AddMember{Group: groups[i], Username: "ann"})
	}
	dead := f.deps
	dead.Store = deadUserMoverStore{Store: f.deps.Store, requests: 3}
	if _, err := commands.NewRenameUserHandler(dead).Handle(ctx, f.tenant, commands.RenameUser{Username: "ann", NewUsername: "ann.b"}, f.meta); err != nil {
		t.Fatal(err)
	}
	later := f.deps
	later.Now = func() time.Time { return time.Now().Add(time.Minute) } // the dead mover's lease has run out
	if _, err := commands.NewCreateUserHandler(later, nil).Handle(ctx, f.tenant, commands.CreateUser{Username: "ann"}, f.meta); err != nil {
		t.Fatal(err)
	}
	f.run(t, commands.ChangeMembers{Group: "g149", Remove: []string{"ann.b"}})

	f.replayAndVerify(t, "a rename in 150 groups")
	for _, g := range groups {
		m, err := projections.DecodeMembership(f.nextItem(t, dynamo.GroupID(g), dynamo.MemberSK("ann.b")))
		if want := g != "g149"; err != nil || m.IsDeleted == want {
			t.Errorf("ann.b's membership of %s: %+v (%v), want live %v", g, m, err, want)
		}
		if m, err := projections.DecodeMembership(f.nextItem(t, dynamo.GroupID(g), dynamo.MemberSK("ann"))); err != nil || !m.IsDeleted {
			t.Errorf("the old name's membership of %s: %+v (%v), want a tombstone", g, m, err)
		}
	}
}
