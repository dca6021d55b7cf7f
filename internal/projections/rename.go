package projections

import (
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
)

// reduceUserRenamed projects a rename as the write side made it (docs/storage.md,
// "Renames"): the old name's view becomes a tombstone at the version after the last one
// it had, with the membership revision the rename took there, and its memberships are
// tombstoned by the same cascade a delete runs; the person's view appears under the new
// name; and each moved membership is added under the new name at the group's version when
// the rename was decided. That version may equal the one of a tombstone an earlier
// incarnation of the new name left in the group: the moved membership then wins by its
// higher membership revision (MemberAdd.Moved).
func reduceUserRenamed(e events.Envelope) (Effects, error) {
	p, ok := e.Payload.(*events.UserRenamed)
	if !ok {
		return Effects{}, payloadMismatch(e)
	}
	fx, err := reduceUser(e)
	if err != nil {
		return Effects{}, err
	}
	tomb, err := marshal(UserView{
		ID:                   dynamo.UserID(p.PreviousUsername),
		SK:                   dynamo.SKConfig,
		Username:             p.PreviousUsername,
		Version:              p.PreviousVersion + 1,
		ConfigUpdatedAt:      formatTime(e.OccurredAt),
		DeletedMembershipRev: p.PreviousDeletedMembershipRev,
		IsDeleted:            true,
	})
	if err != nil {
		return Effects{}, err
	}
	fx.Upserts = append(fx.Upserts, Upsert{Item: tomb, Version: p.PreviousVersion + 1})
	groups := make([]string, 0, len(p.Memberships))
	for _, m := range p.Memberships {
		groups = append(groups, m.GroupKey)
		add, err := memberAdd(e, events.Group{Key: m.GroupKey, Name: m.GroupName, Version: m.GroupVersion},
			events.Member{Username: p.User.Username, UserID: p.User.ID, MembershipRev: m.MembershipRev, ExpiresAt: m.ExpiresAt})
		if err != nil {
			return Effects{}, err
		}
		if add, err = withAddedAt(add, m); err != nil {
			return Effects{}, err
		}
		add.Moved = true
		fx.MemberAdds = append(fx.MemberAdds, add)
	}
	if p.PreviousDeletedMembershipRev > 0 {
		fx.UserCascade = &UserCascade{Username: p.PreviousUsername, DeletedRev: p.PreviousDeletedMembershipRev, Groups: groups}
	}
	return fx, nil
}

// withAddedAt keeps the time the membership began, not the rename's.
func withAddedAt(add MemberAdd, m events.RenamedMembership) (MemberAdd, error) {
	if m.AddedAt.IsZero() {
		return add, nil
	}
	for _, it := range []Item{add.Live, add.Obsolete} {
		it["added_at"] = str(formatTime(m.AddedAt))
	}
	return add, nil
}
