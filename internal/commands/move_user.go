package commands

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/events"
)

// A user rename is made in three steps (docs/storage.md, "Renames"), so that a person in
// any number of groups can be renamed:
//
//  1. The renamer marks the live user's config (MarkRename: the mark, with a lease, and
//     the count of user deletes covering the name raised, in one transaction).
//  2. It reads the memberships and decides; then one small transaction records the
//     rename: the new name's config, pending at the rename's version under the same
//     kind of lease as a members change; the old name's tombstone, conditioned on the
//     mark still being the renamer's and marked with where the memberships are moving
//     (moved_to); the revisions, the email guard, the lookups.
//  3. The memberships move, a few in each transaction (MoveUserMemberships), and the
//     pending mark is cleared.
//
// Why no membership is lost or doubled. Every group command that touches one person's
// membership — adding, removing (also by expiry), a members change, a group rename —
// reads the counts of user deletes first, then the users, and its transaction conditions
// on those counts. One that read the count before the mark decides again; one that read
// it after reads the mark, the pending move or the moved tombstone, and waits for the
// rename or, once its lease ran out, finishes it (settleUser) before deciding anything.
// So from the mark until the last membership moved, no such command writes about the
// person, and what the rename read stays true: the record lists every membership the
// person has, each at its group's version then. The one group command that touches a
// membership without naming its person is a group's delete: a delete that came after the
// rename read the group is at a higher group version than the record's, so readers and
// the projector order it after the move (the membership is gone with the group); the
// mover's condition on the group's config leaves the membership of a group deleted
// since where the delete's clean-up removes it. A command naming the new name, or
// creating or renaming onto the old one, meets the pending mark and finishes the move
// first, so no other person's membership can take the old name's item while the move
// still has to delete it.

// settleUser waits for, or finishes, what stands in the way of a command on agg: a
// rename being decided (its mark; once the lease ran out, the mark is removed: the
// rename recorded nothing), or a rename's memberships still moving to agg's name or away
// from it (once the lease ran out, this moves them itself). own is a mark that is the
// caller's own (a renamer deciding again). waited says whether anything stood in the
// way: the caller reads again and decides again.
func (d Deps) settleUser(ctx context.Context, t Tenant, agg UserAggregate, own string) (waited bool, err error) {
	name := agg.State.Username
	waitUntil := d.Now().Add(membersWait)
	for pause := 20 * time.Millisecond; ; pause = min(2*pause, 500*time.Millisecond) {
		var (
			held    *MembersLease
			expired func() error
		)
		switch {
		case agg.Live() && agg.Renaming != nil && agg.Renaming.Owner != own:
			mark := agg.Renaming.Owner
			held, expired = agg.Renaming, func() error { return d.Store.ClearRenameMark(ctx, t, name, mark) }
		case agg.Live() && agg.Pending != nil:
			p := *agg.Pending
			held, expired = agg.Pending, func() error { return d.takeOverUser(ctx, t, name, p) }
		case agg.Exists && !agg.Live() && agg.MovedTo != "" && agg.MovedTo != name:
			to, err := d.Store.LoadUser(ctx, t, agg.MovedTo)
			if err != nil || to.Pending == nil || to.Pending.Version != agg.MovedVersion {
				return waited, err
			}
			name, agg = agg.MovedTo, to
			continue
		default:
			return waited, nil
		}
		waited = true
		now := d.Now()
		if now.Before(held.Until) {
			if !now.Before(waitUntil) {
				return true, apperr.Unavailable(fmt.Errorf("user %s: a rename is still being made", agg.State.ID), held.Until.Sub(now))
			}
			select {
			case <-ctx.Done():
				return true, ctx.Err()
			case <-time.After(min(pause, held.Until.Sub(now)+time.Millisecond)):
			}
		} else if err := expired(); err != nil {
			return true, err
		}
		if agg, err = d.Store.LoadUser(ctx, t, name); err != nil {
			return true, err
		}
	}
}

// settleUsers is settleUser for every user of a batch read: waited says whether any was
// in the way (then the caller decides again, with what they are now).
func (d Deps) settleUsers(ctx context.Context, t Tenant, users map[string]UserAggregate) (waited bool, err error) {
	for _, u := range users {
		if u.Renaming == nil && u.Pending == nil && u.MovedTo == "" {
			continue
		}
		w, err := d.settleUser(ctx, t, u, "")
		if err != nil {
			return true, err
		}
		waited = waited || w
	}
	return waited, nil
}

// takeOverUser takes the run-out lease of the rename pending under username and moves
// its memberships. Losing the lease to another command is no error: the caller reads the
// user again and waits for that one.
func (d Deps) takeOverUser(ctx context.Context, t Tenant, username string, pending MembersLease) error {
	now := d.Now()
	lease := MembersLease{Version: pending.Version, Owner: d.NewID(), Until: now.Add(membersLease)}
	ok, err := d.Store.LeaseUserMove(ctx, t, username, lease, now)
	if err != nil || !ok {
		return err
	}
	e, err := d.Store.LoadRecord(ctx, t, events.KindUser, username, pending.Version)
	if errors.Is(err, ErrRecordGone) {
		d.log().Error("a pending rename's record has expired; its memberships may not all have moved",
			zap.String("tenant", t.System+"/"+t.ID), zap.Int64("version", pending.Version))
		return d.Store.FinishUserMove(ctx, t, username, lease)
	}
	if err != nil {
		return err
	}
	p, ok := e.Payload.(*events.UserRenamed)
	if !ok {
		return fmt.Errorf("user v%d is marked with a pending rename but records %s", pending.Version, e.Type)
	}
	if err := d.writeUserMove(ctx, t, lease, p); !errors.Is(err, errLeaseLost) {
		return err
	}
	return nil
}

// writeUserMove moves the memberships of a recorded user rename while lease is held,
// then clears the new name's pending mark. Every move can be repeated: a writer that
// takes over simply moves everything again (what moved already is left).
func (d Deps) writeUserMove(ctx context.Context, t Tenant, lease MembersLease, p *events.UserRenamed) error {
	var mu sync.Mutex // MoveUserMemberships runs guard from several goroutines
	guard := d.userLeaseGuard(t, p.User.Username, &lease, &mu)
	mv := UserMove{From: p.PreviousUsername, To: p.User.Username, UserID: p.User.ID, Memberships: p.Memberships}
	if err := d.Store.MoveUserMemberships(ctx, t, mv, guard); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	return d.Store.FinishUserMove(ctx, t, p.User.Username, lease)
}

// userLeaseGuard is leaseGuard for a user rename's move, whose lease is on the new
// name's config.
func (d Deps) userLeaseGuard(t Tenant, username string, lease *MembersLease, mu *sync.Mutex) func(context.Context) error {
	return d.renewingGuard(lease, mu, func(ctx context.Context, next MembersLease, now time.Time) (bool, error) {
		return d.Store.LeaseUserMove(ctx, t, username, next, now)
	})
}

// userMoveFailed logs a rename whose memberships its mover could not all move: the
// rename is recorded and answered as done; the next command on either name moves them.
func (d Deps) userMoveFailed(t Tenant, userID string, version int64, err error) {
	d.log().Warn("the memberships of a user rename have not all moved; the next command on either name moves them",
		zap.String("tenant", t.System+"/"+t.ID), zap.String("user_id", userID), zap.Int64("version", version), zap.Error(err))
}
