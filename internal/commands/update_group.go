package commands

import (
	"context"

	"github.com/ssodir/ssodir/internal/events"
)

// UpdateGroup changes a group's description or (replacing the map) attributes.
type UpdateGroup struct {
	Name        string
	Description *string
	Attributes  *map[string][]string
}

// UpdateGroupHandler decides UpdateGroup.
type UpdateGroupHandler struct{ deps Deps }

func NewUpdateGroupHandler(d Deps) UpdateGroupHandler { return UpdateGroupHandler{deps: d} }

func (c *UpdateGroup) Validate() error {
	var p problems
	if c.Description != nil {
		checkText(&p, "description", *c.Description, maxDescription, true)
	}
	if c.Attributes != nil {
		checkAttributes(&p, *c.Attributes)
	}
	return p.Err(invalidRequest)
}

func (h UpdateGroupHandler) Handle(ctx context.Context, t Tenant, cmd UpdateGroup, m Meta) (events.Group, error) {
	if err := cmd.Validate(); err != nil {
		return events.Group{}, err
	}
	var result events.Group
	err := retry(ctx, func() error {
		agg, err := loadLiveGroup(ctx, h.deps, t, cmd.Name)
		if err != nil {
			return err
		}
		if err := checkIfMatch(m, agg.State.Version); err != nil {
			return err
		}
		old, next := agg.State, agg.State
		if cmd.Description != nil {
			next.Description = *cmd.Description
		}
		if cmd.Attributes != nil {
			next.Attributes = cloneAttrs(*cmd.Attributes)
		}
		changes := groupChanges(old, next)
		if len(changes) == 0 {
			result = old
			return h.deps.recordNoop(ctx, t, m, events.KindGroup, old.Key, old.Version)
		}
		now := h.deps.now()
		next.Version, next.UpdatedAt = old.Version+1, now
		put, del := lookupChanges(GroupLookups(old), GroupLookups(next))
		c := Change{
			PutLookups: put, DeleteLookups: del,
			Event:           h.deps.envelope(m, events.KindGroup, old.Key, next.Version, now, changes, &events.GroupUpdated{Group: next}),
			ExpectedVersion: old.Version,
			Group:           &GroupAggregate{Exists: true, State: next},
			Idempotency:     m.Idempotency,
			Actor:           m.Actor,
		}
		result = next
		return h.deps.Store.Append(ctx, t, c)
	})
	return result, err
}
