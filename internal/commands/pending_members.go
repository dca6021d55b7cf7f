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
	"github.com/ssodir/ssodir/internal/identity"
)

// A ChangeMembers is recorded in one transaction and its membership items are written
// after it, outside any transaction (DynamoDB Local takes a batch write of them at a third
// of the cost of the same items in transactions, and a thousand do not fit in one). Until
// they are all written the group's config carries the change as pending, with a lease:
// one writer at a time writes the items of a pending change, and every other command on
// the group waits for it (membersWait) or, once the lease has run out (its writer died),
// takes the lease and writes them itself, before deciding anything.
const (
	// membersLease is how long a writer holds a pending change without renewing.
	membersLease = 30 * time.Second
	// membersRenew: a writer renews its lease before a request when less than this is
	// left, so that no request of it starts after the lease could have run out. A writer
	// stopped for longer than this between the check and its request (SIGSTOP) is the one
	// case the lease cannot rule out.
	membersRenew = 20 * time.Second
	// membersWait is how long a command waits for another writer's pending change before
	// answering 503 with Retry-After.
	membersWait = 10 * time.Second
)

// MembersLease marks a group whose last change's membership items may not all be written
// yet: Version is that change's (the group's current) version, Owner the writer holding
// it until Until.
type MembersLease struct {
	Version int64
	Owner   string
	Until   time.Time
}

// errLeaseLost stops a writer whose lease another writer took.
var errLeaseLost = errors.New("the lease on the pending members change was taken over")

// pendingFailed logs a pending change that its writer could not finish: the change is
// recorded and answered as done; the next command on the group finishes it.
func (d Deps) pendingFailed(t Tenant, key string, version int64, err error) {
	d.log().Warn("the membership items of a members change are not all written; the next command on the group writes them",
		zap.String("tenant", t.System+"/"+t.ID), zap.String("aggregate", "group#"+key), zap.Int64("version", version), zap.Error(err))
}

// loadLiveGroup loads a group that must exist and not be deleted, by name in any case,
// with no members change pending: one that is, is finished first.
func loadLiveGroup(ctx context.Context, d Deps, t Tenant, name string) (GroupAggregate, error) {
	agg, err := loadGroup(ctx, d.Store, t, name)
	if err != nil {
		return agg, err
	}
	waitUntil := d.Now().Add(membersWait)
	for pause := 20 * time.Millisecond; agg.Pending != nil; pause = min(2*pause, 500*time.Millisecond) {
		now := d.Now()
		if now.Before(agg.Pending.Until) {
			if !now.Before(waitUntil) {
				return agg, apperr.Unavailable(fmt.Errorf("group %s: members change v%d still being written", agg.State.Key, agg.Pending.Version),
					agg.Pending.Until.Sub(now))
			}
			select {
			case <-ctx.Done():
				return agg, ctx.Err()
			case <-time.After(min(pause, agg.Pending.Until.Sub(now)+time.Millisecond)):
			}
		} else if err := d.takeOver(ctx, t, agg); err != nil {
			return agg, err
		}
		if agg, err = loadGroup(ctx, d.Store, t, name); err != nil {
			return agg, err
		}
	}
	return agg, nil
}

func loadGroup(ctx context.Context, s Store, t Tenant, name string) (GroupAggregate, error) {
	agg, err := s.LoadGroup(ctx, t, identity.GroupKey(name))
	if err != nil {
		return agg, err
	}
	if !agg.Live() {
		return agg, apperr.NotFound("group")
	}
	return agg, nil
}

// takeOver takes the run-out lease of agg's pending change and writes its items. Losing
// the lease to another command is no error: the caller reloads the group and waits for it.
func (d Deps) takeOver(ctx context.Context, t Tenant, agg GroupAggregate) error {
	now := d.Now()
	lease := MembersLease{Version: agg.Pending.Version, Owner: d.NewID(), Until: now.Add(membersLease)}
	ok, err := d.Store.LeaseMembers(ctx, t, agg.State.Key, lease, now)
	if err != nil || !ok {
		return err
	}
	e, err := d.Store.LoadRecord(ctx, t, events.KindGroup, agg.State.Key, agg.Pending.Version)
	if errors.Is(err, ErrRecordGone) {
		// Only a change left pending for longer than SSO_HISTORY_RETENTION: its items
		// cannot be known any more, and the group must not stay blocked.
		d.log().Error("a pending members change's record has expired; its membership items may be incomplete",
			zap.String("tenant", t.System+"/"+t.ID), zap.String("aggregate", "group#"+agg.State.Key), zap.Int64("version", agg.Pending.Version))
		return d.Store.FinishMembers(ctx, t, agg.State.Key, lease)
	}
	if err != nil {
		return err
	}
	switch p := e.Payload.(type) {
	case *events.GroupMembersChanged:
		err = d.writePending(ctx, t, lease, p, nil)
	case *events.GroupRenamed:
		err = d.writeMove(ctx, t, lease, p)
	default:
		return fmt.Errorf("group %s v%d is marked with a pending members change but records %s", agg.State.Key, agg.Pending.Version, e.Type)
	}
	if !errors.Is(err, errLeaseLost) {
		return err
	}
	return nil
}

// writePending writes the membership items of a recorded change while owner holds its
// lease: first every group pointer in the added users' partitions, then the memberships
// (so that a user delete that finds a membership also finds its pointer), then the
// removals. Then it checks that every added user still lives: a user deleted after the
// decision may have been deleted before its pointer was written, so that its delete did
// not remove the membership written here; such memberships are removed again (the
// user's delete covers them in the read model, as their revision is below its own).
// Last, the mark is cleared. Every write can be repeated, so a writer that takes over
// simply writes everything again.
//
// deletes, when not nil, are the counts of user deletes covering the users, read before
// the change read them: if the counts of the added users are the same after the writes, no
// user was deleted in between (one deleted before was seen deleted when deciding; one deleted after finds
// the pointer and the membership, both written), and the users are not read again. A
// writer that takes over knows no count and reads them all.
func (d Deps) writePending(ctx context.Context, t Tenant, lease MembersLease, p *events.GroupMembersChanged, deletes DeleteCounts) error {
	g := p.Group
	var mu sync.Mutex // WriteMembers runs guard from several goroutines
	guard := d.leaseGuard(t, g.Key, &lease, &mu)
	// A member erased meanwhile (internal/erasure rewrote the record) has no name left:
	// the erasure removed their membership, and nothing is written for them.
	added, removed := unerased(p.Added), unerased(p.Removed)
	w := MembersWrite{GroupKey: g.Key, GroupID: g.ID, Version: g.Version, At: g.UpdatedAt, Added: added, Removed: removed}
	if err := d.Store.WriteMembers(ctx, t, w, guard); err != nil {
		return err
	}
	check := len(added) > 0
	names := make([]string, len(added))
	for i, m := range added {
		names[i] = m.Username
	}
	if check && deletes != nil {
		now, err := d.Store.UserDeleteCounts(ctx, t, names)
		if err != nil {
			return err
		}
		check = deletes.Moved(now)
	}
	if check {
		users, err := d.Store.LoadUsers(ctx, t, names)
		if err != nil {
			return err
		}
		var gone []events.Member
		for _, m := range added {
			if u := users[m.Username]; !u.Live() || u.State.ID != m.UserID {
				gone = append(gone, m)
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

// leaseGuard is the guard of a pending change's writes: before each request it renews
// *lease when less than membersRenew is left, and stops the writer (errLeaseLost) when
// another took the lease. mu guards *lease (the writes run side by side).
func (d Deps) leaseGuard(t Tenant, key string, lease *MembersLease, mu *sync.Mutex) func(context.Context) error {
	return d.renewingGuard(lease, mu, func(ctx context.Context, next MembersLease, now time.Time) (bool, error) {
		return d.Store.LeaseMembers(ctx, t, key, next, now)
	})
}

// renewingGuard is a guard that renews *lease with renew (false: another holds it).
func (d Deps) renewingGuard(lease *MembersLease, mu *sync.Mutex,
	renew func(ctx context.Context, next MembersLease, now time.Time) (bool, error)) func(context.Context) error {
	return func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		now := d.Now()
		if now.Add(membersRenew).Before(lease.Until) {
			return nil
		}
		next := *lease
		next.Until = now.Add(membersLease)
		ok, err := renew(ctx, next, now)
		if err != nil {
			return err
		}
		if !ok {
			return errLeaseLost
		}
		*lease = next
		return nil
	}
}

// unerased are the members of a recorded change that were not erased since.
func unerased(ms []events.Member) []events.Member {
	out := make([]events.Member, 0, len(ms))
	for _, m := range ms {
		if !m.Erased {
			out = append(out, m)
		}
	}
	return out
}
