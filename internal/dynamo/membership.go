package dynamo

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
)

// Membership is a membership as the write model holds it now.
type Membership struct {
	// GroupID and UserID are the directory ids of the incarnations of group and user the
	// membership joins.
	GroupID, UserID string
}

// CurrentMembership reads, strongly consistently, the group's config item and the user's
// membership item in it. ok is false when the group is gone or the user is not a member
// of its current incarnation (a membership item left behind by a delete whose clean-up
// has not finished yet is not one).
func (s *CommandStore) CurrentMembership(ctx context.Context, t commands.Tenant, groupKey, username string) (Membership, bool, error) {
	ms, err := s.CurrentMemberships(ctx, t, groupKey, []string{username})
	m, ok := ms[username]
	return m, ok, err
}

// CurrentMemberships is CurrentMembership of many users of one group: the memberships
// of those of the usernames that have one now. While a members change of the group is
// pending (commands.ChangeMembersHandler), or a rename's memberships are still moving to
// it (commands.RenameGroupHandler), its record decides for the users it names: its items
// may not all be written yet.
func (s *CommandStore) CurrentMemberships(ctx context.Context, t commands.Tenant, groupKey string, usernames []string) (map[string]Membership, error) {
	keys := make([]map[string]types.AttributeValue, 0, len(usernames)+1)
	keys = append(keys, map[string]types.AttributeValue{"id": str(GroupID(groupKey)), "sk": str(SKConfig)})
	for _, u := range usernames {
		keys = append(keys, map[string]types.AttributeValue{"id": str(GroupID(groupKey)), "sk": str(MemberSK(u))})
	}
	items, err := s.batchGet(ctx, s.table(t), keys)
	if err != nil {
		return nil, fmt.Errorf("get memberships in %s: %w", groupKey, err)
	}
	var group map[string]types.AttributeValue
	for _, it := range items {
		if getS(it, "sk") == SKConfig {
			group = it
		}
	}
	out := map[string]Membership{}
	if group == nil || getBool(group, "deleted") {
		return out, nil
	}
	groupID := getS(group, "group_id")
	lastDeleted, err := getN(group, "last_deleted_version")
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		sk := getS(it, "sk")
		if !IsMemberSK(sk) {
			continue
		}
		added, err := getN(it, "group_version")
		if err != nil {
			return nil, err
		}
		if added > lastDeleted {
			out[sk[len(skMember):]] = Membership{GroupID: groupID, UserID: getS(it, "user_id")}
		}
	}
	if _, ok := group["members_pending"]; ok {
		pending, err := getN(group, "members_pending")
		if err != nil {
			return nil, err
		}
		if err := s.overlayPending(ctx, t, groupKey, groupID, pending, usernames, out); err != nil {
			return nil, err
		}
	}
	return out, s.overlayUserMoves(ctx, t, groupKey, groupID, lastDeleted, usernames, out)
}

// overlayUserMoves sets out for the usernames without a membership item here whose
// rename's memberships are still moving to them (commands.RenameUserHandler): the
// rename's record decides, with the item still under the old name.
func (s *CommandStore) overlayUserMoves(ctx context.Context, t commands.Tenant, groupKey, groupID string, lastDeleted int64, usernames []string, out map[string]Membership) error {
	var keys []map[string]types.AttributeValue
	for _, u := range usernames {
		if _, ok := out[u]; !ok {
			keys = append(keys, map[string]types.AttributeValue{"id": str(UserID(u)), "sk": str(SKConfig)})
		}
	}
	if len(keys) == 0 {
		return nil
	}
	users, err := s.batchGet(ctx, s.table(t), keys)
	if err != nil {
		return fmt.Errorf("get users of %s: %w", groupKey, err)
	}
	for _, it := range users {
		if _, ok := it["members_pending"]; !ok || getBool(it, "deleted") {
			continue
		}
		version, err := getN(it, "members_pending")
		if err != nil {
			return err
		}
		username := getS(it, "username")
		e, err := s.LoadRecord(ctx, t, events.KindUser, username, version)
		if err != nil {
			return err
		}
		p, ok := e.Payload.(*events.UserRenamed)
		if !ok {
			return fmt.Errorf("user %s v%d is marked with a pending rename but records %s", logUser(username), version, e.Type)
		}
		if !slices.ContainsFunc(p.Memberships, func(m events.RenamedMembership) bool { return m.GroupKey == groupKey }) {
			continue
		}
		item, err := s.get(ctx, s.table(t), GroupID(groupKey), MemberSK(p.PreviousUsername))
		if err == nil && item == nil {
			// Moved since the first read: it is under the new name now.
			item, err = s.get(ctx, s.table(t), GroupID(groupKey), MemberSK(username))
		}
		if err != nil {
			return err
		}
		if item == nil {
			continue
		}
		added, err := getN(item, "group_version")
		if err != nil {
			return err
		}
		if getS(item, "user_id") == p.User.ID && added > lastDeleted {
			out[username] = Membership{GroupID: groupID, UserID: p.User.ID}
		}
	}
	return nil
}

// overlayPending sets out, for the usernames the pending change at version names, to what
// it decided: removed, or added while the user still lives (the change's writer removes
// the membership of a user deleted meanwhile).
func (s *CommandStore) overlayPending(ctx context.Context, t commands.Tenant, groupKey, groupID string, version int64, usernames []string, out map[string]Membership) error {
	e, err := s.LoadRecord(ctx, t, events.KindGroup, groupKey, version)
	if err != nil {
		return err
	}
	var p *events.GroupMembersChanged
	switch r := e.Payload.(type) {
	case *events.GroupMembersChanged:
		p = r
	case *events.GroupRenamed:
		// A rename's memberships are still moving here: the record lists them all, and
		// nothing else is a member of this incarnation yet.
		p = &events.GroupMembersChanged{}
		for _, m := range r.Members {
			if !m.Erased {
				p.Added = append(p.Added, events.Member{Username: m.Username, UserID: m.UserID, MembershipRev: m.MembershipRev})
			}
		}
	default:
		return fmt.Errorf("group %s v%d is marked with a pending members change but records %s", groupKey, version, e.Type)
	}
	asked := make(map[string]bool, len(usernames))
	for _, u := range usernames {
		asked[u] = true
	}
	for _, m := range p.Removed {
		if asked[m.Username] {
			delete(out, m.Username)
		}
	}
	var added []events.Member
	var names []string
	for _, m := range p.Added {
		if asked[m.Username] {
			added = append(added, m)
			names = append(names, m.Username)
		}
	}
	if len(added) == 0 {
		return nil
	}
	users, err := s.LoadUsers(ctx, t, names)
	if err != nil {
		return err
	}
	for _, m := range added {
		if u := users[m.Username]; u.Live() && u.State.ID == m.UserID {
			out[m.Username] = Membership{GroupID: groupID, UserID: m.UserID}
		} else {
			delete(out, m.Username)
		}
	}
	return nil
}
