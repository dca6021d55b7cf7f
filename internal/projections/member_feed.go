package projections

import (
	"fmt"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// memberFeedItems are the items a membership change writes into the member's own feed
// (`entity#user:<username>`), besides the group's: a user's timeline shows when they were
// added to or removed from a group, by whom (docs/storage.md, "activity feed"). Each is
// the group's item for that member (same event id, sort key, type, entity `group:<key>`,
// actor, time and group version) with the group's name as its change (`group`: new for an
// addition, old for a removal or the group's delete: group.deleted lists the members it
// removed), and the member's user id (`user_id`, never shown), by
// which an erasure of one incarnation of a name tells its items from an earlier
// incarnation's. They carry no actor_pk or day_pk: the actor's and the day's feeds list
// the group's item once. An erased member gets none. The keys are derived from the event,
// so a redelivery or a replay rewrites the same items.
func (a activity) memberFeedItems(e events.Envelope) ([]Item, error) {
	type member struct {
		eventID, username, userID string
		t                         events.Type
	}
	var ms []member
	var group events.Group
	switch p := e.Payload.(type) {
	case *events.GroupMemberAdded:
		group = p.Group
		if !p.Erased {
			ms = append(ms, member{e.EventID, p.Username, p.UserID, events.GroupMemberAddedType})
		}
	case *events.GroupMemberRemoved:
		group = p.Group
		if !p.Erased {
			ms = append(ms, member{e.EventID, p.Username, p.UserID, events.GroupMemberRemovedType})
		}
	case *events.GroupMembersChanged:
		group = p.Group
		// The numbering is items' (`<event id>.<n>`): added first, then removed.
		for i, m := range p.Added {
			if !m.Erased {
				ms = append(ms, member{memberEventID(e.EventID, i), m.Username, m.UserID, events.GroupMemberAddedType})
			}
		}
		for i, m := range p.Removed {
			if !m.Erased {
				ms = append(ms, member{memberEventID(e.EventID, len(p.Added)+i), m.Username, m.UserID, events.GroupMemberRemovedType})
			}
		}
	case *events.GroupDeleted:
		// The delete ended the memberships its record lists (from the write model, as it
		// was decided): the feed items come from the record alone, never from the read
		// model, so any order of records and any replay writes the same ones.
		group = p.Group
		for _, m := range p.Members {
			if !m.Erased {
				ms = append(ms, member{e.EventID, m.Username, m.UserID, events.GroupDeletedType})
			}
		}
	default:
		return nil, nil
	}
	out := make([]Item, 0, len(ms))
	for _, m := range ms {
		if m.username == "" {
			return nil, fmt.Errorf("%s %s v%d: a member without a username", e.Type, identity.LogKey(e.Entity()), e.Version)
		}
		change := events.Change{New: group.Name}
		if m.t == events.GroupMemberRemovedType || m.t == events.GroupDeletedType {
			change = events.Change{Old: group.Name}
		}
		changes, err := changeSet(map[string]events.Change{"group": change})
		if err != nil {
			return nil, err
		}
		v := ActivityView{
			PK:         EntityPK("user:" + m.username),
			SK:         ActivitySK(e.OccurredAt, m.eventID),
			EventID:    m.eventID,
			Type:       string(m.t),
			Entity:     e.Entity(),
			Actor:      e.Actor,
			OccurredAt: dynamo.FormatTime(e.OccurredAt),
			Version:    e.Version,
			Changes:    changes,
			UserID:     m.userID,
		}
		if a.retention > 0 {
			v.ExpiresAt = e.OccurredAt.Add(a.retention).Unix()
		}
		it, err := marshal(v)
		if err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, nil
}

// memberEventID is the event id of the n-th member's items of a group.members_changed.
func memberEventID(eventID string, n int) string { return fmt.Sprintf("%s.%04d", eventID, n) }
