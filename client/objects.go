package client

import "github.com/ssodir/ssodir/internal/objects"

// User is a user as both APIs answer with it (API.md, "Objects"); its ID is the
// directory's immutable id of this incarnation of the user (its ssodir_id in Keycloak).
// It is the services' own type, so that the client and the APIs cannot drift apart.
type User = objects.User

// Group is a group as both APIs answer with it.
type Group = objects.Group

// NewUser is the body of a user create. IsActive nil means active; Password is sent once
// and never comes back.
type NewUser struct {
	Username   string              `json:"username"`
	Email      string              `json:"email,omitempty"`
	FirstName  string              `json:"first_name,omitempty"`
	LastName   string              `json:"last_name,omitempty"`
	IsActive   *bool               `json:"is_active,omitempty"`
	Attributes map[string][]string `json:"attributes,omitempty"`
	Password   string              `json:"password,omitempty"`
}

// UserPatch changes the fields it sets; Attributes replaces the whole map.
type UserPatch struct {
	Email      *string             `json:"email,omitempty"`
	FirstName  *string             `json:"first_name,omitempty"`
	LastName   *string             `json:"last_name,omitempty"`
	Attributes map[string][]string `json:"attributes,omitempty"`
}

// NewGroup is the body of a group create.
type NewGroup struct {
	Name        string              `json:"name"`
	Description string              `json:"description,omitempty"`
	Attributes  map[string][]string `json:"attributes,omitempty"`
}

// GroupPatch changes the fields it sets; Attributes replaces the whole map.
type GroupPatch struct {
	Description *string             `json:"description,omitempty"`
	Attributes  map[string][]string `json:"attributes,omitempty"`
}

// Tenant is a tenant's public settings (never the Keycloak client secret).
type Tenant struct {
	SystemID  string            `json:"system_id"`
	TenantID  string            `json:"tenant_id"`
	Status    string            `json:"status"`
	Keycloak  *KeycloakSettings `json:"keycloak"`
	CreatedAt string            `json:"created_at"`
	UpdatedAt string            `json:"updated_at"`
}

// Tenant statuses.
const (
	TenantProvisioning = "provisioning"
	TenantActive       = "active"
	// TenantDropping is a provisioning being undone (the table quota was reached): the
	// tenant will be gone.
	TenantDropping = "dropping"
)

// KeycloakSettings are a tenant's Keycloak settings. ClientSecret is only ever sent.
type KeycloakSettings struct {
	URL          string `json:"url"`
	Realm        string `json:"realm"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret,omitempty"`
	// OnDelete is "delete" (the default) or "disable".
	OnDelete string `json:"on_delete,omitempty"`
}

// NewTenant is the body of a tenant provisioning.
type NewTenant struct {
	TenantID string            `json:"tenant_id"`
	Keycloak *KeycloakSettings `json:"keycloak,omitempty"`
}

// Activity is one item of an activity feed.
type Activity struct {
	EventID    string            `json:"event_id"`
	Type       string            `json:"type"`
	Entity     string            `json:"entity"`
	Actor      string            `json:"actor"`
	OccurredAt string            `json:"occurred_at"`
	Version    int64             `json:"version"`
	Changes    map[string]Change `json:"changes"`
}

// Change is one field's old and new value in an activity item.
type Change struct {
	Old any `json:"old"`
	New any `json:"new"`
}

// Page is one page of a list; NextCursor is empty on the last.
type Page[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}
