package projector

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/projections"
)

// deadMoverStore is the command store, except that its MoveMembers dies after a few
// requests: the process that renamed the group died in the middle of the move.
type deadMoverStore struct {
	commands.Store
	requests int64
}

func (s deadMoverStore) MoveMembers(ctx context.Context, t commands.Tenant, m commands.MembersMove, before func(context.Context) error) error {
	return s.Store.MoveMembers(ctx, t, m, diesAfter(s.requests, before))
}

// diesAfter is before for a mover whose process dies after requests requests.
func diesAfter(requests int64, before func(context.Context) error) func(context.Context) error {
	var n atomic.Int64
	return func(ctx context.Context) error {
		if n.Add(1) > requests {
			return errors.New("the process died")
		}
		return before(ctx)
	}
}

// TestReplayRebuildsARenameOfManyMembersMidMove: a group of 200 members renamed by a
// process that died in the middle of the move (some memberships under the new key, most
// still under the old one), then a member renamed (which finishes the move first, once
// the mover's lease ran out): a replay of the log builds every membership under the new
// key, the renamed member's under the new username, the old key's memberships as
// tombstones, and passes the verification against the write model.
func TestReplayRebuildsARenameOfManyMembersMidMove(t *testing.T) {
	ctx := context.Background()
	f := newRebuildFixtureOn(t, dynamotest.Private(t))
	members := make([]string, 200)
	for i := range members {
		members[i] = fmt.Sprintf("m%03d", i)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, u := range members {
		g.Go(func() error {
			_, err := commands.NewCreateUserHandler(f.deps, nil).Handle(gctx, f.tenant, commands.CreateUser{Username: u}, f.meta)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	f.run(t, commands.CreateGroup{Name: "big"}, commands.ChangeMembers{Group: "big", Add: members})

	dead := f.deps
	dead.Store = deadMoverStore{Store: f.deps.Store, requests: 10}
	if _, err := commands.NewRenameGroupHandler(dead).Handle(ctx, f.tenant, commands.RenameGroup{Name: "big", NewName: "Huge"}, f.meta); err != nil {
		t.Fatal(err)
	}
	later := f.deps
	later.Now = func() time.Time { return time.Now().Add(time.Minute) } // the dead mover's lease has run out
	if _, err := commands.NewRenameUserHandler(later).Handle(ctx, f.tenant, commands.RenameUser{Username: "m199", NewUsername: "m199.x"}, f.meta); err != nil {
		t.Fatal(err)
	}

	f.replayAndVerify(t, "a rename of 200 members")
	for _, u := range append(members[:199:199], "m199.x") {
		if m, err := projections.DecodeMembership(f.nextItem(t, dynamo.GroupID("huge"), dynamo.MemberSK(u))); err != nil || m.IsDeleted || m.GroupName != "Huge" {
			t.Errorf("%s's membership of huge: %+v (%v)", u, m, err)
		}
	}
	for _, u := range members {
		if m, err := projections.DecodeMembership(f.nextItem(t, dynamo.GroupID("big"), dynamo.MemberSK(u))); err != nil || !m.IsDeleted {
			t.Errorf("%s's membership of the old name: %+v (%v), want a tombstone", u, m, err)
		}
	}
	if m, err := projections.DecodeMembership(f.nextItem(t, dynamo.GroupID("huge"), dynamo.MemberSK("m199"))); err != nil || (m.MemberID != "" && !m.IsDeleted) {
		t.Errorf("the old username's membership of huge: %+v (%v), want none or a tombstone", m, err)
	}
}
