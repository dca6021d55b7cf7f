package auth

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ssodir/ssodir/internal/apperr"
)

// A SCIM token is the long-lived secret an identity provider keeps for one SCIM
// connection to one tenant: `ssodir_scim.<id>.<secret>`. Only an HMAC of it is stored, under
// a key the database does not hold, so a copy of the table lets no one provision.
const scimTokenPrefix = "ssodir_scim."

// ScimTokenSubjectPrefix starts the actor of the commands a SCIM token sends:
// `scim-token:<id>`.
const ScimTokenSubjectPrefix = "scim-token:"

// scimTokenKeyInfo separates the SCIM token key from every other key derived from the
// same secret.
const scimTokenKeyInfo = "ssodir command-api scim token v1"

// IsScimToken reports whether a bearer token has the shape of a SCIM token (it may still
// be invalid).
func IsScimToken(bearer string) bool { return strings.HasPrefix(bearer, scimTokenPrefix) }

// ScimTokenHasher mints SCIM tokens and computes the HMAC that is stored of them.
type ScimTokenHasher struct{ key []byte }

// NewScimTokenHasher hashes under key (SSO_SCIM_TOKEN_KEY, or DeriveScimTokenKey of the
// secret key); every command-api instance must use the same one.
func NewScimTokenHasher(key []byte) (*ScimTokenHasher, error) {
	if len(key) < 32 {
		return nil, errors.New("the SCIM token key must be at least 32 bytes")
	}
	return &ScimTokenHasher{key: append([]byte(nil), key...)}, nil
}

// DeriveScimTokenKey derives the SCIM token key from the secret key with HKDF-SHA256.
func DeriveScimTokenKey(secret []byte) ([]byte, error) {
	k, err := hkdf.Key(sha256.New, secret, nil, scimTokenKeyInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("derive the SCIM token key: %w", err)
	}
	return k, nil
}

// Mint makes a new token for id: the token to show once, and the hash to store.
func (h *ScimTokenHasher) Mint(id string) (token, hash string, err error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return "", "", fmt.Errorf("mint a SCIM token: %w", err)
	}
	token = scimTokenPrefix + id + "." + base64.RawURLEncoding.EncodeToString(secret)
	return token, h.hash(token), nil
}

func (h *ScimTokenHasher) hash(token string) string {
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(token))
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}

// ScimTokenRecord is a stored SCIM token: never its secret, only the HMAC of it.
type ScimTokenRecord struct {
	System, Tenant, ID, Name, Hash, CreatedBy string
	CreatedAt                                 time.Time
	// ExpiresAt is the zero time for a token that does not expire.
	ExpiresAt time.Time
}

// ScimTokenLookup finds a stored token; ok is false when there is none (revoked or never
// made).
type ScimTokenLookup interface {
	GetScimToken(ctx context.Context, system, tenant, id string) (rec ScimTokenRecord, ok bool, err error)
}

// ScimTokens verifies SCIM tokens against the stored ones. A revoked token is gone from
// the store, so it fails on the next request.
type ScimTokens struct {
	Hasher *ScimTokenHasher
	Store  ScimTokenLookup
	Now    func() time.Time
}

// ScimTokenID is the id a SCIM token names; ok is false for what is not a well-formed
// SCIM token.
func ScimTokenID(bearer string) (id string, ok bool) {
	rest, ok := strings.CutPrefix(bearer, scimTokenPrefix)
	id, _, ok2 := strings.Cut(rest, ".")
	return id, ok && ok2 && id != "" && len(bearer) <= 256
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
	id, ok := ScimTokenID(bearer)
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
	if !hmac.Equal([]byte(v.Hasher.hash(bearer)), []byte(want)) || !found {
		return Principal{}, apperr.Unauthenticated("invalid SCIM token (unknown, revoked, or for another tenant)")
	}
	if !rec.ExpiresAt.IsZero() && !v.Now().Before(rec.ExpiresAt) {
		return Principal{}, apperr.Unauthenticated("SCIM token expired")
	}
	return ScimTokenPrincipal(system, tenant, rec.ID), nil
}
