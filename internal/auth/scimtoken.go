package auth

import (
	"context"
	"strings"
	"time"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/scimtoken"
)

// ScimTokenSubjectPrefix starts the actor of the commands a SCIM token sends:
// `scim-token:<id>`.
const ScimTokenSubjectPrefix = "scim-token:"

// ScimTokenLookup finds a stored SCIM token; ok is false when there is none (revoked or
// never made).
type ScimTokenLookup interface {
	GetScimToken(ctx context.Context, system, tenant, id string) (rec scimtoken.Record, ok bool, err error)
}

// ScimTokens verifies SCIM tokens against the stored ones. A revoked token is gone from
// the store, so it fails on the next request.
type ScimTokens struct {
	Hasher *scimtoken.Hasher
	Store  ScimTokenLookup
	Now    func() time.Time
}

// ScimTokenPrincipal is who a valid SCIM token of system/tenant with this id is: it may read
// and write that tenant's directory and nothing else.
func ScimTokenPrincipal(system, tenant, id string) Principal {
	return Principal{
		Subject: ScimTokenSubjectPrefix + id,
		Scopes:  map[string]bool{ScopeWrite: true, ScopeRead: true},
		Tenants: []string{system + "/" + tenant},
	}
}

// Authenticate verifies a SCIM token for the SCIM endpoints of system/tenant.
func (v ScimTokens) Authenticate(ctx context.Context, system, tenant, bearer string) (Principal, error) {
	id, ok := scimtoken.ID(bearer)
	if !ok {
		return Principal{}, apperr.Unauthenticated("invalid SCIM token")
	}
	rec, found, err := v.Store.GetScimToken(ctx, system, tenant, id)
	if err != nil {
		return Principal{}, err
	}
	// The HMAC is compared even for a token that is not found, so timing does not tell a
	// stranger which ids exist.
	want := rec.Hash
	if !found {
		want = "hmac-sha256:" + strings.Repeat("0", 64)
	}
	if !v.Hasher.Matches(bearer, want) || !found {
		return Principal{}, apperr.Unauthenticated("invalid SCIM token (unknown, revoked, or for another tenant)")
	}
	if !rec.ExpiresAt.IsZero() && !v.Now().Before(rec.ExpiresAt) {
		return Principal{}, apperr.Unauthenticated("SCIM token expired")
	}
	return ScimTokenPrincipal(system, tenant, rec.ID), nil
}
