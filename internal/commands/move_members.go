package commands

import (
	"context"
	"sync"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/events"
)

// A group rename that moves memberships is recorded in one transaction, and its
// memberships move after it, in batches (as a members change's items are written): the
// new key's config carries the rename as its pending change, under the same lease, and the
// old key's tombstone names the key its memberships are moving to. Until the move is
// over, every command on the new group waits for it or, once the lease ran out, finishes
// it (loadLiveGroup, takeOver); every command that meets the old key's tombstone (a create
// or a rename onto the old name, a user rename of a member) does the same (finishMove);
// the write model's readers read the rename's record beside the items
// (dynamo.CurrentMemberships). A crash leaves the move to the next of them.

// writeMove moves the memberships of a recorded group rename while lease is held: the
// moves (pointers to the new key first, so that a user delete that read the user's
// pointers at any time finds what it must remove), then a check that every moved member
// still lives as the same person (a member deleted after the rename read them, whose
// delete may have missed the membership under the new key, loses it again), then the
// pending mark cleared. Every write can be repeated: a writer that takes over writes
// everything again.
func (d Deps) writeMove(ctx context.Context, t Tenant, lease MembersLease, p *events.GroupRenamed) error {
	g := p.Group
	var mu sync.Mutex // MoveMembers runs guard from several goroutines
	guard := d.leaseGuard(t, g.Key, &lease, &mu)
	mv := MembersMove{From: p.PreviousKey, To: g.Key, Version: g.Version, Members: p.Members}
	if err := d.Store.MoveMembers(ctx, t, mv, guard); err != nil {
		return err
	}
	var names []string
	for _, m := range p.Members {
		if !m.Erased {
			names = append(names, m.Username)
		}
	}
	if len(names) > 0 {
		users, err := d.Store.LoadUsers(ctx, t, names)
		if err != nil {
			return err
		}
		var gone []events.Member
		for _, m := range p.Members {
			if u := users[m.Username]; !m.Erased && (!u.Live() || u.State.ID != m.UserID) {
				gone = append(gone, events.Member{Username: m.Username, UserID: m.UserID})
			}
		}
		if len(gone) > 0 {
			if err := guard(ctx); err != nil {
				return err
			}
			if err := d.Store.UndoMembers(ctx, t, g.Key, g.Version, gone); err != nil {
				return err
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return d.Store.FinishMembers(ctx, t, g.Key, lease)
}

// finishMove waits for, or finishes, the move of memberships away from agg, the old key's
// tombstone a group rename left, while that move is still going on: its new key is
// still pending at the rename's version. waited says whether it was. A command that
// would write under the old key, or that read a member's items there, calls it first.
func finishMove(ctx context.Context, d Deps, t Tenant, agg GroupAggregate) (waited bool, err error) {
	if agg.MovedTo == "" || agg.State.Key == agg.MovedTo {
		return false, nil
	}
	to, err := d.Store.LoadGroup(ctx, t, agg.MovedTo)
	if err != nil || to.Pending == nil || to.Pending.Version != agg.MovedVersion {
		return false, err
	}
	if _, err := loadLiveGroup(ctx, d, t, agg.MovedTo); err != nil && apperr.KindOf(err) != apperr.KindNotFound {
		return true, err
	}
	return true, nil
}
