package client

import (
	"context"
	"net/http"
	"time"
)

// NewScimToken is a SCIM token to make: a name for the identity provider's connection,
// and an optional expiry.
type NewScimToken struct {
	Name      string     `json:"name"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// ScimToken is a tenant's SCIM token. Token, the secret, is set only in the answer to
// CreateScimToken: it is shown once and stored only as an HMAC.
type ScimToken struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	Token     string  `json:"token,omitempty"`
	CreatedAt string  `json:"created_at"`
	ExpiresAt *string `json:"expires_at"`
	CreatedBy string  `json:"created_by"`
}

// CreateScimToken makes a SCIM token for the tenant (scope tenants:admin). The token is
// valid only on the tenant's SCIM endpoints (/scim/v2/{system}/{tenant}).
func (t *TenantClient) CreateScimToken(ctx context.Context, in NewScimToken, opts ...Option) (*ScimToken, error) {
	var out ScimToken
	if _, err := t.c.call(ctx, t.c.command, http.MethodPost, t.path("/scim-tokens"), in, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListScimTokens lists the tenant's SCIM tokens, without their secrets (scope
// tenants:admin).
func (t *TenantClient) ListScimTokens(ctx context.Context) ([]ScimToken, error) {
	var out struct {
		Items []ScimToken `json:"items"`
	}
	if _, err := t.c.call(ctx, t.c.command, http.MethodGet, t.path("/scim-tokens"), nil, &out, nil); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// RevokeScimToken revokes a SCIM token at once (scope tenants:admin).
func (t *TenantClient) RevokeScimToken(ctx context.Context, id string, opts ...Option) error {
	_, err := t.c.call(ctx, t.c.command, http.MethodDelete, t.path("/scim-tokens/"+seg(id)), nil, nil, opts)
	return err
}
