package commandapi

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/ssodir/ssodir/internal/events"
)

// optional is a JSON field that can be absent, null, or a value — what PATCH needs.
type optional[T any] struct {
	Set   bool
	Null  bool
	Value T
}

func (o *optional[T]) UnmarshalJSON(b []byte) error {
	o.Set = true
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		o.Null = true
		return nil
	}
	return json.Unmarshal(b, &o.Value)
}

// ptr is the value to apply: nil when absent, the zero value when null.
func (o optional[T]) ptr() *T {
	if !o.Set {
		return nil
	}
	return &o.Value
}

// userJSON is API.md's user object.
type userJSON struct {
	Username   string              `json:"username"`
	Email      string              `json:"email"`
	FirstName  string              `json:"first_name"`
	LastName   string              `json:"last_name"`
	IsActive   bool                `json:"is_active"`
	Attributes map[string][]string `json:"attributes"`
	Version    int64               `json:"version"`
	CreatedAt  string              `json:"created_at"`
	UpdatedAt  string              `json:"updated_at"`
}

// groupJSON is API.md's group object.
type groupJSON struct {
	Name        string              `json:"name"`
	Description string              `json:"description"`
	Attributes  map[string][]string `json:"attributes"`
	Version     int64               `json:"version"`
	CreatedAt   string              `json:"created_at"`
	UpdatedAt   string              `json:"updated_at"`
}

// tenantJSON is a tenant without its secret.
type tenantJSON struct {
	SystemID  string        `json:"system_id"`
	TenantID  string        `json:"tenant_id"`
	Status    string        `json:"status"`
	Keycloak  *keycloakJSON `json:"keycloak"`
	CreatedAt string        `json:"created_at"`
	UpdatedAt string        `json:"updated_at"`
}

type keycloakJSON struct {
	URL      string `json:"url"`
	Realm    string `json:"realm"`
	ClientID string `json:"client_id"`
	OnDelete string `json:"on_delete"`
}

func timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func attrs(a map[string][]string) map[string][]string {
	if a == nil {
		return map[string][]string{}
	}
	return a
}

func toUserJSON(u events.User) userJSON {
	return userJSON{
		Username: u.Username, Email: u.Email, FirstName: u.FirstName, LastName: u.LastName,
		IsActive: u.IsActive, Attributes: attrs(u.Attributes), Version: u.Version,
		CreatedAt: timestamp(u.CreatedAt), UpdatedAt: timestamp(u.UpdatedAt),
	}
}

func toGroupJSON(g events.Group) groupJSON {
	return groupJSON{
		Name: g.Name, Description: g.Description, Attributes: attrs(g.Attributes), Version: g.Version,
		CreatedAt: timestamp(g.CreatedAt), UpdatedAt: timestamp(g.UpdatedAt),
	}
}
