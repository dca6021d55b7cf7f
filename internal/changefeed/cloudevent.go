package changefeed

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ssodir/ssodir/internal/events"
)

// TypePrefix is what a CloudEvent's type puts before the event name.
const TypePrefix = "io.ssodir."

// Event is one change as a CloudEvents 1.0 JSON object (API.md "Changes out").
type Event struct {
	SpecVersion     string    `json:"specversion"`
	ID              string    `json:"id"`
	Source          string    `json:"source"`
	Type            string    `json:"type"`
	Subject         string    `json:"subject,omitempty"`
	Time            time.Time `json:"time"`
	DataContentType string    `json:"datacontenttype"`
	Data            Data      `json:"data"`
}

// Data is a CloudEvent's data: the aggregate's immutable id, its version, who changed it,
// the field-level change set and the state after the change. The state is the event's
// user or group, which never holds a password.
type Data struct {
	ID      string                   `json:"id"`
	Version int64                    `json:"version"`
	Actor   string                   `json:"actor"`
	Changes map[string]events.Change `json:"changes"`
	State   any                      `json:"state"`
}

// Change is one record of the command log on its way into the feed.
type Change struct {
	System, Tenant string
	// Aggregate is the immutable id (user or group id); Version its version after the change.
	Aggregate string
	Version   int64
	// Requires is the version of the same aggregate recorded under another partition that
	// must be in the feed first (a rename's previous version); 0: none. Records of one
	// partition reach the projector in order, so only a rename needs it.
	Requires int64
	// RequiresAt is when the required change was recorded; zero: it is no longer in the
	// command log (expired or erased), so it will never come.
	RequiresAt time.Time
	// Event is the CloudEvent's JSON.
	Event []byte
}

// FromEnvelope is the change of one decoded history record.
func FromEnvelope(system, tenant string, env events.Envelope) (Change, error) {
	d := Data{Version: env.Version, Actor: env.Actor, Changes: env.Changes}
	if d.Changes == nil {
		d.Changes = map[string]events.Change{}
	}
	subject := string(env.Kind) + ":" + env.Key
	var requires int64
	switch p := env.Payload.(type) {
	case *events.UserDeleted:
		d.ID = p.PreviousID
		d.State = p.User
	case *events.UserErased:
		// The person is gone: nothing that names them goes out, not even the username.
		d.ID = p.PreviousID
		d.State = map[string]any{"id": p.PreviousID, "version": env.Version, "deleted": true}
		d.Changes = map[string]events.Change{}
		subject = ""
	case *events.UserRenamed:
		d.ID, d.State, requires = p.User.ID, p.User, p.PreviousVersion
	case *events.GroupRenamed:
		d.ID, d.State, requires = p.Group.ID, p.Group, p.PreviousVersion
	case *events.GroupDeleted:
		d.ID, d.State = p.PreviousID, p.Group
	case *events.GroupMemberAdded:
		d.ID, d.State = p.Group.ID, p.Group
		addChange(d.Changes, "member", nil, member(p.Username, p.UserID, p.Erased))
	case *events.GroupMemberRemoved:
		d.ID, d.State = p.Group.ID, p.Group
		addChange(d.Changes, "member", member(p.Username, p.UserID, p.Erased), nil)
	case *events.GroupMemberExpirySet:
		d.ID, d.State = p.Group.ID, p.Group
		m := member(p.Username, p.UserID, p.Erased)
		addChange(d.Changes, "member", m, m)
	case *events.GroupMembersChanged:
		d.ID, d.State = p.Group.ID, p.Group
		removed, added := make([]any, 0, len(p.Removed)), make([]any, 0, len(p.Added))
		for _, m := range p.Removed {
			removed = append(removed, member(m.Username, m.UserID, m.Erased))
		}
		for _, m := range p.Added {
			added = append(added, member(m.Username, m.UserID, m.Erased))
		}
		addChange(d.Changes, "members", removed, added)
	default:
		if u, ok := events.UserState(env.Payload); ok {
			d.ID, d.State = u.ID, u
		} else if g, ok := events.GroupState(env.Payload); ok {
			d.ID, d.State = g.ID, g
		} else {
			return Change{}, fmt.Errorf("changefeed: no state in a %s event", env.Type)
		}
	}
	if d.ID == "" {
		return Change{}, fmt.Errorf("changefeed: a %s event without an aggregate id", env.Type)
	}
	ev := Event{
		SpecVersion: "1.0", ID: env.EventID, Source: Source(system, tenant),
		Type: TypePrefix + string(env.Type), Subject: subject, Time: env.OccurredAt.UTC(),
		DataContentType: "application/json", Data: d,
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		return Change{}, fmt.Errorf("changefeed: encode %s: %w", env.Type, err)
	}
	if raw, err = Trim(raw, MaxEventBytes); err != nil {
		return Change{}, err
	}
	return Change{System: system, Tenant: tenant, Aggregate: d.ID, Version: env.Version, Requires: requires, Event: raw}, nil
}

// Source is a tenant's CloudEvents source.
func Source(system, tenant string) string { return "/v1/systems/" + system + "/tenants/" + tenant }

// member is a membership in a change set; an erased member is named by nothing.
func member(username, userID string, erased bool) any {
	if erased {
		return map[string]any{"erased": true}
	}
	return map[string]any{"username": username, "user_id": userID}
}

// addChange sets a membership change unless the command's own change set has one.
func addChange(c map[string]events.Change, field string, old, new any) {
	if _, ok := c[field]; !ok {
		c[field] = events.Change{Old: old, New: new}
	}
}
