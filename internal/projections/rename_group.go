package projections

import (
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
)

// reduceGroupRenamed projects a group rename as the write side made it (docs/storage.md,
// "Group renames"): the group's view appears under the new key (with its former names),
// the old key's view becomes a tombstone at the version after the last one it had and its
// memberships are tombstoned by the cascade a delete runs, and each moved membership is
// added under the new key at the rename's version, keeping its membership revision (a
// later delete of the user still covers it) and the time it began. A change of case keeps
// the key: the view and the memberships are written again under the new name.
func reduceGroupRenamed(e events.Envelope) (Effects, error) {
	p, ok := e.Payload.(*events.GroupRenamed)
	if !ok {
		return Effects{}, payloadMismatch(e)
	}
	fx, err := reduceGroup(e)
	if err != nil {
		return Effects{}, err
	}
	for _, m := range p.Members {
		if m.Erased {
			continue // an erased member's membership is gone with the member
		}
		add, err := memberAdd(e, p.Group, events.Member{Username: m.Username, UserID: m.UserID, MembershipRev: m.MembershipRev, ExpiresAt: m.ExpiresAt})
		if err != nil {
			return Effects{}, err
		}
		if add, err = withAddedAt(add, events.RenamedMembership{AddedAt: m.AddedAt}); err != nil {
			return Effects{}, err
		}
		fx.MemberAdds = append(fx.MemberAdds, add)
	}
	if p.PreviousKey == p.Group.Key {
		return fx, nil
	}
	tomb, err := marshal(GroupView{
		ID:                 dynamo.GroupID(p.PreviousKey),
		SK:                 dynamo.SKConfig,
		Key:                p.PreviousKey,
		Name:               p.PreviousName,
		Version:            p.PreviousVersion + 1,
		ConfigUpdatedAt:    formatTime(e.OccurredAt),
		LastDeletedVersion: p.PreviousVersion + 1,
		IsDeleted:          true,
	})
	if err != nil {
		return Effects{}, err
	}
	fx.Upserts = append(fx.Upserts, Upsert{Item: tomb, Version: p.PreviousVersion + 1})
	fx.GroupCascade = &GroupCascade{GroupKey: p.PreviousKey, Version: p.PreviousVersion + 1}
	return fx, nil
}
