// Package objects holds the JSON shapes of API.md's "Objects" — users, groups and tenants
// as both APIs answer with them — so the command and the query API cannot drift apart.
package objects

import (
	"time"

	"github.com/ssodir/ssodir/internal/events"
)

// User is a user as API.md's "Objects" shows it. It has no password field: the read model
// never holds one.
type User struct {
	// ID is the directory's immutable id of this incarnation of the user: the ssodir_id
	// keycloak-sync gives its Keycloak user (what `ssodirctl import keycloak` marks with).
	ID         string              `json:"id"`
	Username   string              `json:"username"`
	Email      string              `json:"email"`
	FirstName  string              `json:"first_name"`
	LastName   string              `json:"last_name"`
	IsActive   bool                `json:"is_active"`
	Attributes map[string][]string `json:"attributes"`
	Version    int64               `json:"version"`
	CreatedAt  string              `json:"created_at"`
	UpdatedAt  string              `json:"updated_at"`
	// ExpiresAt, in a group's list of members, is when the membership ends by itself
	// (API.md, "Memberships that expire"); absent elsewhere and when it does not.
	ExpiresAt string `json:"expires_at,omitempty"`
}

// Group is a group as API.md's "Objects" shows it; Name keeps the case it was given.
type Group struct {
	// ID is the directory's immutable id of this incarnation of the group (its ssodir_id).
	ID          string              `json:"id"`
	Name        string              `json:"name"`
	Description string              `json:"description"`
	Attributes  map[string][]string `json:"attributes"`
	Version     int64               `json:"version"`
	CreatedAt   string              `json:"created_at"`
	UpdatedAt   string              `json:"updated_at"`
	// ExpiresAt, in a user's list of groups, is when the membership ends by itself;
	// absent elsewhere and when it does not.
	ExpiresAt string `json:"expires_at,omitempty"`
}

// Tenant is a tenant's public settings; the Keycloak client secret is never among them.
type Tenant struct {
	SystemID string `json:"system_id"`
	TenantID string `json:"tenant_id"`
	Status   string `json:"status"`
	// Keycloak is null while the tenant has no Keycloak settings.
	Keycloak  *Keycloak `json:"keycloak"`
	CreatedAt string    `json:"created_at"`
	UpdatedAt string    `json:"updated_at"`
}

// Keycloak is a tenant's Keycloak settings without the client secret.
type Keycloak struct {
	URL      string `json:"url"`
	Realm    string `json:"realm"`
	ClientID string `json:"client_id"`
	OnDelete string `json:"on_delete"`
	// UsernameChanges is whether the realm lets usernames change (allowed, refused — "Edit
	// username" is off — or unknown): PUT /keycloak asks the realm; the query API's GET of
	// the tenant says what keycloak-sync's last reconcile found (unknown before one).
	// Tenant lists leave it out.
	UsernameChanges string `json:"username_changes,omitempty"`
}

// TimeFormat is API.md's timestamp: RFC 3339, UTC, milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// Timestamp formats t as TimeFormat.
func Timestamp(t time.Time) string { return t.UTC().Format(TimeFormat) }

// Attributes is never null in a response: an empty map reads better for clients.
func Attributes(a map[string][]string) map[string][]string {
	if a == nil {
		return map[string][]string{}
	}
	return a
}

// FromUser is the object of a user's state.
func FromUser(u events.User) User {
	return User{
		ID: u.ID, Username: u.Username, Email: u.Email, FirstName: u.FirstName, LastName: u.LastName,
		IsActive: u.IsActive, Attributes: Attributes(u.Attributes), Version: u.Version,
		CreatedAt: Timestamp(u.CreatedAt), UpdatedAt: Timestamp(u.UpdatedAt),
	}
}

// FromGroup is the object of a group's state.
func FromGroup(g events.Group) Group {
	return Group{
		ID: g.ID, Name: g.Name, Description: g.Description, Attributes: Attributes(g.Attributes), Version: g.Version,
		CreatedAt: Timestamp(g.CreatedAt), UpdatedAt: Timestamp(g.UpdatedAt),
	}
}

// ScimToken is a tenant's SCIM token without its secret; Token is set only in the answer
// to the request that made it, the one time it is shown.
type ScimToken struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	Token     string  `json:"token,omitempty"`
	CreatedAt string  `json:"created_at"`
	ExpiresAt *string `json:"expires_at"`
	CreatedBy string  `json:"created_by"`
}

// ScimTokenList is the answer to GET …/scim-tokens.
type ScimTokenList struct {
	Items []ScimToken `json:"items"`
}

// Webhook is a tenant's webhook endpoint and its delivery state (API.md "Changes out").
// Secret is set only in the answers to its creation and to a rotation, the one time each
// secret is shown.
type Webhook struct {
	ID          string   `json:"id"`
	URL         string   `json:"url"`
	Types       []string `json:"types"`
	Description string   `json:"description"`
	// State is active or disabled (after failing for a day; a replay re-enables it).
	State     string `json:"state"`
	CreatedAt string `json:"created_at"`
	CreatedBy string `json:"created_by"`
	Secret    string `json:"secret,omitempty"`
	// PreviousSecretUntil: the secret a rotation replaced signs too until then.
	PreviousSecretUntil *string `json:"previous_secret_until,omitempty"`
	// FailedAttempts counts the failed attempts at the change it is held at.
	FailedAttempts  int     `json:"failed_attempts"`
	FailingSince    *string `json:"failing_since,omitempty"`
	NextAttempt     *string `json:"next_attempt,omitempty"`
	LastError       string  `json:"last_error,omitempty"`
	LastStatus      int     `json:"last_status,omitempty"`
	DisabledAt      *string `json:"disabled_at,omitempty"`
	LastDeliveredAt *string `json:"last_delivered_at,omitempty"`
}

// WebhookList is the answer to GET …/webhooks.
type WebhookList struct {
	Items []Webhook `json:"items"`
}

// WebhookDelivery is one attempt to deliver one change to an endpoint.
type WebhookDelivery struct {
	EventID string `json:"event_id"`
	Type    string `json:"type"`
	// Subject is the change's subject while the feed keeps it (none once it expired or its
	// person was erased).
	Subject        string  `json:"subject,omitempty"`
	Attempt        int     `json:"attempt"`
	Status         string  `json:"status"`
	ResponseStatus int     `json:"response_status,omitempty"`
	Error          string  `json:"error,omitempty"`
	At             string  `json:"at"`
	NextAttempt    *string `json:"next_attempt,omitempty"`
}

// WebhookDeliveryList is the answer to GET …/webhooks/{id}/deliveries, newest first.
type WebhookDeliveryList struct {
	Items      []WebhookDelivery `json:"items"`
	NextCursor string            `json:"next_cursor,omitempty"`
}
