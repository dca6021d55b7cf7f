package commands

import (
	"context"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// CreateGroup creates a group, or creates it again after a delete.
type CreateGroup struct {
	Name        string
	Description string
	Attributes  map[string][]string
}

// CreateGroupHandler decides CreateGroup.
type CreateGroupHandler struct{ deps Deps }

func NewCreateGroupHandler(d Deps) CreateGroupHandler { return CreateGroupHandler{deps: d} }

func (c *CreateGroup) Validate() error {
	var p problems
	checkGroupName(&p, c.Name)
	checkText(&p, "description", c.Description, maxDescription, true)
	checkAttributes(&p, c.Attributes)
	return p.Err(invalidRequest)
}

func (h CreateGroupHandler) Handle(ctx context.Context, t Tenant, cmd CreateGroup, m Meta) (events.Group, error) {
	if err := cmd.Validate(); err != nil {
		return events.Group{}, err
	}
	key := identity.GroupKey(cmd.Name)
	var created events.Group
	// The first attempt assumes the name was never used, the common case, so that a create
	// costs one transaction and no read; if it was, the transaction's version condition
	// fails and the next attempt reads what is there.
	fresh := true
	err := retry(ctx, func() error {
		var agg GroupAggregate
		if !fresh {
			var err error
			if agg, err = h.deps.Store.LoadGroup(ctx, t, key); err != nil {
				return err
			}
		}
		fresh = false
		if agg.Live() {
			return apperr.Conflict(apperr.CodeGroupExists, "a group with this name exists")
		}
		// A group renamed away from the name may still be moving its memberships out.
		if _, err := finishMove(ctx, h.deps, t, agg); err != nil {
			return err
		}
		if agg.CleanupPending {
			if err := finishGroupCleanup(ctx, h.deps.Store, t, agg); err != nil {
				return err
			}
		}
		now := h.deps.now()
		created = events.Group{
			ID: h.deps.NewID(), Key: key, Name: cmd.Name, Description: cmd.Description,
			Attributes: cloneAttrs(cmd.Attributes), Version: agg.State.Version + 1,
			CreatedAt: now, UpdatedAt: now, LastDeletedVersion: agg.State.LastDeletedVersion,
		}
		put, del := lookupChanges(GroupLookups(agg.State), GroupLookups(created))
		c := Change{
			PutLookups: put, DeleteLookups: del,
			Event: h.deps.envelope(m, events.KindGroup, key, created.Version, now,
				groupChanges(events.Group{}, created), &events.GroupCreated{Group: created}),
			ExpectedVersion: agg.State.Version,
			Group:           &GroupAggregate{Exists: true, State: created},
			Idempotency:     m.Idempotency,
			Actor:           m.Actor,
		}
		return h.deps.Store.Append(ctx, t, c)
	})
	return created, err
}

// finishGroupCleanup removes memberships a group delete left behind.
func finishGroupCleanup(ctx context.Context, s Store, t Tenant, agg GroupAggregate) error {
	ms, err := s.GroupMembers(ctx, t, agg.State.Key)
	if err != nil {
		return err
	}
	return s.RemoveMembersAfter(ctx, t, Cleanup{Kind: events.KindGroup, Key: agg.State.Key, Version: agg.State.Version, Members: ms})
}
