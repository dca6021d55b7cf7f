package commands

import (
	"context"
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

// MaxRenameGroupMembers is how many memberships a group rename moves in its one
// transaction (five items each beside six fixed ones); a larger group cannot be renamed
// yet (400).
const MaxRenameGroupMembers = 18

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

// GroupRename is everything a group rename writes, in one transaction: Change holds the
// group under the new key (Event, Group, ExpectedVersion: the new key's aggregate version,
// 0 when the name was never used; PutLookups; Idempotency). When the key changes, the old
// key's config becomes Tombstone (conditioned on FromVersion) and each membership moves
// to the new key (conditioned on the old item still being that user's), with its user's
// group pointer. A rename that changes only the case of the name keeps its key: then
// FromKey is the new key and nothing moves.
type GroupRename struct {
	Change      Change
	FromKey     string
	FromVersion int64
	Tombstone   events.Group
	Members     []GroupMember
}

// Moves reports whether the rename changes the group's key.
func (r GroupRename) Moves() bool { return r.FromKey != r.Change.Event.Key }

// Handle returns the group under its new name.
func (h RenameGroupHandler) Handle(ctx context.Context, t Tenant, cmd RenameGroup, m Meta) (events.Group, error) {
	if err := cmd.Validate(); err != nil {
		return events.Group{}, err
	}
	newKey := identity.GroupKey(cmd.NewName)
	var result events.Group
	err := retry(ctx, func() error {
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
			return apperr.InvalidField("name",
				fmt.Sprintf("the group has more than %d members; a rename moves at most %d", MaxRenameGroupMembers, MaxRenameGroupMembers))
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
		payload := &events.GroupRenamed{Group: next, PreviousName: old.Name, PreviousKey: old.Key, PreviousVersion: old.Version}
		for _, gm := range members {
			payload.Members = append(payload.Members, events.RenamedMember{Username: gm.Username, UserID: gm.UserID,
				MembershipRev: gm.MembershipRev, AddedAt: gm.AddedAt, ExpiresAt: gm.ExpiresAt})
		}
		changes := map[string]events.Change{"name": {Old: old.Name, New: next.Name}}
		put, _ := lookupChanges(nil, GroupLookups(next))
		r := GroupRename{
			Change: Change{
				Event:           h.deps.envelope(m, events.KindGroup, next.Key, next.Version, now, changes, payload),
				ExpectedVersion: target.State.Version,
				Group:           &GroupAggregate{Exists: true, State: next},
				PutLookups:      put,
				Idempotency:     m.Idempotency,
				Actor:           m.Actor,
			},
			FromKey: old.Key, FromVersion: old.Version,
			Tombstone: events.Group{
				Key: old.Key, Name: old.Name, Version: old.Version + 1, CreatedAt: old.CreatedAt, UpdatedAt: now,
				Deleted: true, LastDeletedVersion: old.Version + 1,
			},
			Members: members,
		}
		result = next
		return h.deps.Store.AppendGroupRename(ctx, t, r)
	})
	return result, err
}
