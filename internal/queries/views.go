package queries

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/objects"
	"github.com/ssodir/ssodir/internal/projections"
)

// Activity is one item of the activity feed.
type Activity struct {
	EventID    string          `json:"event_id"`
	Type       string          `json:"type"`
	Entity     string          `json:"entity"`
	Actor      string          `json:"actor"`
	OccurredAt string          `json:"occurred_at"`
	Version    int64           `json:"version"`
	Changes    json.RawMessage `json:"changes"`
}

// Page is one page of a list; NextCursor is nil on the last page.
type Page[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// userJSON is a user view as the API shows it. The view's own updated_at is when it was
// projected; the user's is config_updated_at.
func userJSON(v projections.UserView) objects.User {
	return objects.User{
		ID:         v.UserID,
		Username:   v.Username,
		Email:      v.Email,
		FirstName:  v.FirstName,
		LastName:   v.LastName,
		IsActive:   v.IsActive,
		Attributes: nonNil(v.Attributes),
		Version:    v.Version,
		CreatedAt:  timestamp(v.CreatedAt),
		UpdatedAt:  timestamp(v.ConfigUpdatedAt),
	}
}

func groupJSON(v projections.GroupView) objects.Group {
	return objects.Group{
		ID:          v.GroupID,
		Name:        v.Name,
		Description: v.Description,
		Attributes:  nonNil(v.Attributes),
		Version:     v.Version,
		CreatedAt:   timestamp(v.CreatedAt),
		UpdatedAt:   timestamp(v.ConfigUpdatedAt),
	}
}

// currentMembership reports whether a live membership belongs to the present incarnations
// of both its user and its group. The projector tombstones memberships with their user or
// group, and writes an add that a delete overtook as a tombstone; this check only keeps a
// read from showing a membership in the moment between a delete and its cascade.
func currentMembership(m projections.MembershipView, u projections.UserView, g projections.GroupView) bool {
	return !m.IsDeleted && !u.IsDeleted && !g.IsDeleted &&
		m.MembershipRev > u.DeletedMembershipRev && m.Version > g.LastDeletedVersion
}

func activityJSON(a projections.ActivityView) (Activity, error) {
	changes := json.RawMessage(`{}`)
	if a.Changes != "" {
		if !json.Valid([]byte(a.Changes)) {
			return Activity{}, fmt.Errorf("activity %s: changes are not JSON", a.EventID)
		}
		changes = json.RawMessage(a.Changes)
	}
	return Activity{
		EventID:    a.EventID,
		Type:       a.Type,
		Entity:     a.Entity,
		Actor:      a.Actor,
		OccurredAt: timestamp(a.OccurredAt),
		Version:    a.Version,
		Changes:    changes,
	}, nil
}

func tenantView(row dynamo.Tenant) objects.Tenant {
	t := objects.Tenant{
		SystemID:  row.SystemID,
		TenantID:  row.TenantID,
		Status:    row.Status,
		CreatedAt: timestamp(row.CreatedAt),
		UpdatedAt: timestamp(row.UpdatedAt),
	}
	if row.KeycloakURL != "" || row.KeycloakRealm != "" || row.ClientID != "" {
		onDelete := row.OnDelete
		if onDelete == "" {
			onDelete = "delete"
		}
		t.Keycloak = &objects.Keycloak{URL: row.KeycloakURL, Realm: row.KeycloakRealm, ClientID: row.ClientID, OnDelete: onDelete}
	}
	return t
}

// timestamp normalises a stored time to RFC 3339 UTC with milliseconds. The projector
// stores that format already; a value in another RFC 3339 form is converted, and one that
// cannot be read is passed on rather than failing the whole response.
func timestamp(s string) string {
	if s == "" {
		return s
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return dynamo.FormatTime(t)
	}
	return s
}

func nonNil(a map[string][]string) map[string][]string {
	if a == nil {
		return map[string][]string{}
	}
	return a
}
