package commands

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// RenameGroup gives a group a new name: the same group (same id), the next version; the
// old name is free at once, and the memberships move to the new one.
type RenameGroup struct {
	Name    string
	NewName string
}

// RenameGroupHandler decides RenameGroup.
type RenameGroupHandler struct{ deps Deps }

func NewRenameGroupHandler(d Deps) RenameGroupHandler { return RenameGroupHandler{deps: d} }

// MaxRenameGroupMembers is how many memberships a group rename moves: its record lists
// every one (the projector, the Keycloak sync and a replay move them by it), over parts
// when they do not fit in one item (events.SplitMembers), all in the rename's
// transaction: together at most events.MemberListBytes (3 MB), which 10,000 members hold
// with usernames of up to about 150 characters.
var MaxRenameGroupMembers = 10_000

// maxRenameRecord bounds the encoded payload of a group rename's record with its parts
// (events.MemberListBytes; lower in tests).
var maxRenameRecord = events.MemberListBytes

// Validate reports a new name that breaks the rule.
func (c *RenameGroup) Validate() error {
	var p problems
	checkGroupName(&p, c.NewName)
	return p.Err(invalidRequest)
}

// GroupMember is a membership item of a group in the write model.
type GroupMember struct {
	Username string
	MemberState
}

// GroupRename is everything a group rename writes in its transaction: Change holds the
// group under the new key (Event, Group, ExpectedVersion: the new key's aggregate version,
// 0 when the name was never used; PutLookups; Idempotency), with the rename as its
// pending change (Group.Pending) when memberships move. When the key changes, the old
// key's config becomes Tombstone (conditioned on FromVersion and on FromMemberMoves, the
// count of member renames read with it), marked with the new key while Members move
// there after the transaction (writeMove). A rename that changes only the case of the
// name keeps its key: then FromKey is the new key and nothing moves.
type GroupRename struct {
	Change          Change
	FromKey         string
	FromVersion     int64
	FromMemberMoves int64
	Tombstone       events.Group
	Members         []GroupMember
}

// Moves reports whether the rename changes the group's key.
func (r GroupRename) Moves() bool { return r.FromKey != r.Change.Event.Key }

// Handle returns the group under its new name.
func (h RenameGroupHandler) Handle(ctx context.Context, t Tenant, cmd RenameGroup, m Meta) (events.Group, error) {
	if err := cmd.Validate(); err != nil {
		return events.Group{}, err
	}
	newKey := identity.GroupKey(cmd.NewName)
	var (
		result  events.Group
		payload *events.GroupRenamed
		lease   *MembersLease
	)
	err := retry(ctx, func() error {
		payload, lease = nil, nil
		agg, err := loadLiveGroup(ctx, h.deps, t, cmd.Name)
		if err != nil {
			return err
		}
		if err := checkIfMatch(m, agg.State.Version); err != nil {
			return err
		}
		old := agg.State
		if old.Name == cmd.NewName {
			result = old
			return h.deps.recordNoop(ctx, t, m, events.KindGroup, old.Key, old.Version)
		}
		target := agg
		if newKey != old.Key {
			if target, err = h.deps.Store.LoadGroup(ctx, t, newKey); err != nil {
				return err
			}
			if target.Live() {
				return apperr.Conflict(apperr.CodeGroupExists, "a group with this name exists")
			}
			// The name's memberships may still be moving away from it.
			if _, err := finishMove(ctx, h.deps, t, target); err != nil {
				return err
			}
			if target.CleanupPending {
				if err := finishGroupCleanup(ctx, h.deps.Store, t, target); err != nil {
					return err
				}
			}
		}
		// Members are read after the version: a concurrent join bumps the version, so the
		// rename's condition fails and it is decided again with the new member.
		members, err := h.deps.Store.GroupMemberStates(ctx, t, old.Key, MaxRenameGroupMembers+1)
		if err != nil {
			return err
		}
		if len(members) > MaxRenameGroupMembers {
			return tooManyToRename()
		}
		var counts DeleteCounts
		if newKey != old.Key && len(members) > 0 {
			if members, counts, err = liveMembers(ctx, h.deps, t, members); err != nil {
				return err
			}
		}
		now := h.deps.now()
		next := old
		next.Key, next.Name = newKey, cmd.NewName
		// Versions are never reused under a key: a name that held a deleted group goes on
		// from that group's tombstone (docs/storage.md, "Group renames").
		next.Version = max(old.Version, target.State.Version) + 1
		next.UpdatedAt, next.NamedAt = now, now
		next.LastDeletedVersion = target.State.LastDeletedVersion
		if newKey != old.Key {
			// A change of case keeps the key, and with it the activity partition.
			next.FormerNames = append(slices.Clone(old.FormerNames), events.FormerGroupName{Name: old.Name, Key: old.Key, From: old.Named(), Until: now})
		}
		payload = &events.GroupRenamed{Group: next, PreviousName: old.Name, PreviousKey: old.Key, PreviousVersion: old.Version}
		for _, gm := range members {
			payload.Members = append(payload.Members, events.RenamedMember{Username: gm.Username, UserID: gm.UserID,
				MembershipRev: gm.MembershipRev, AddedAt: gm.AddedAt, ExpiresAt: gm.ExpiresAt})
		}
		if data, err := events.Encode(payload); err != nil {
			return err
		} else if len(data) > maxRenameRecord {
			return tooManyToRename()
		}
		if _, _, err := events.SplitMembers(payload); errors.Is(err, events.ErrMemberListTooLong) {
			return tooManyToRename()
		} else if err != nil {
			return err
		}
		group := &GroupAggregate{Exists: true, State: next}
		if newKey != old.Key && len(members) > 0 {
			lease = &MembersLease{Version: next.Version, Owner: m.CommandID, Until: h.deps.Now().Add(membersLease)}
			group.Pending = lease
		}
		changes := map[string]events.Change{"name": {Old: old.Name, New: next.Name}}
		put, _ := lookupChanges(nil, GroupLookups(next))
		r := GroupRename{
			Change: Change{
				Event:           h.deps.envelope(m, events.KindGroup, next.Key, next.Version, now, changes, payload),
				ExpectedVersion: target.State.Version,
				Group:           group,
				DeleteCounts:    counts,
				PutLookups:      put,
				Idempotency:     m.Idempotency,
				Actor:           m.Actor,
			},
			FromKey: old.Key, FromVersion: old.Version, FromMemberMoves: agg.MemberMoves,
			Tombstone: events.Group{
				Key: old.Key, Name: old.Name, Version: old.Version + 1, CreatedAt: old.CreatedAt, UpdatedAt: now,
				Deleted: true, LastDeletedVersion: old.Version + 1,
			},
			Members: members,
		}
		result = next
		return h.deps.Store.AppendGroupRename(ctx, t, r)
	})
	if err != nil {
		return events.Group{}, err
	}
	if lease != nil {
		// The rename is recorded, so it is answered as done whatever happens now: what
		// this cannot move, the next command on either name moves (takeOver, finishMove).
		if err := h.deps.writeMove(ctx, t, *lease, payload); err != nil {
			h.deps.pendingFailed(t, payload.Group.Key, payload.Group.Version, err)
		}
	}
	return result, nil
}

// liveMembers are the members whose users still live as the same person, and the counts
// of user deletes that cover them, read before the users: the rename's transaction
// conditions on them, so that a member deleted or erased before it commits makes it
// decide again, and its record never names a person an erasure already swept
// (docs/erasure.md, "No late writer"). A membership item of a deleted user is left to that
// delete's clean-up, which finds it by the user's pointer to the old key.
// A group delete lists the members it ends the same way.
func liveMembers(ctx context.Context, deps Deps, t Tenant, members []GroupMember) ([]GroupMember, DeleteCounts, error) {
	if len(members) == 0 {
		return nil, nil, nil
	}
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = m.Username
	}
	counts, err := deps.Store.UserDeleteCounts(ctx, t, names)
	if err != nil {
		return nil, nil, err
	}
	users, err := deps.Store.LoadUsers(ctx, t, names)
	if err != nil {
		return nil, nil, err
	}
	// A member's rename being made moves its membership: it goes first (move_user.go).
	if waited, err := deps.settleUsers(ctx, t, users); err != nil || waited {
		return nil, nil, cmp.Or(err, ErrVersionConflict)
	}
	live := members[:0:0]
	for _, m := range members {
		if u := users[m.Username]; u.Live() && u.State.ID == m.UserID {
			live = append(live, m)
		}
	}
	return live, counts, nil
}

// tooManyToRename is the 400 of a group whose members one rename's record cannot list.
func tooManyToRename() error {
	return apperr.InvalidField("name", fmt.Sprintf("the group has too many members to rename: a rename moves at most %d "+
		"(fewer with long usernames: its record lists them in at most %d KB)", MaxRenameGroupMembers, maxRenameRecord/1000))
}
