// Package scimtoken holds what a SCIM token is: its format, the HMAC under which it is
// stored, and the stored record. A SCIM token is the long-lived secret an identity
// provider keeps for one SCIM connection to one tenant: `ssodir_scim.<id>.<secret>`. Only an
// HMAC of it is stored, under a key the database does not hold, so a copy of the table
// lets no one provision. It imports only the standard library, so that every layer that
// touches tokens (the commands that make them, the store, the authentication) can use it.
package scimtoken

import (
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
)

const prefix = "ssodir_scim."

// keyInfo separates the SCIM token key from every other key derived from the same secret.
const keyInfo = "ssodir command-api scim token v1"

// maxLen bounds a token: anything longer is not one.
const maxLen = 256

// Is reports whether a bearer token has the shape of a SCIM token (it may still be
// invalid).
func Is(bearer string) bool { return strings.HasPrefix(bearer, prefix) }

// ID is the id a SCIM token names; ok is false for what is not a well-formed SCIM token.
func ID(bearer string) (id string, ok bool) {
	rest, ok := strings.CutPrefix(bearer, prefix)
	id, _, ok2 := strings.Cut(rest, ".")
	return id, ok && ok2 && id != "" && len(bearer) <= maxLen
}

// Hasher mints SCIM tokens and computes the HMAC that is stored of them.
type Hasher struct{ key []byte }

// NewHasher hashes under key (SSO_SCIM_TOKEN_KEY, or DeriveKey of the secret key); every
// command-api instance must use the same one.
func NewHasher(key []byte) (*Hasher, error) {
	if len(key) < 32 {
		return nil, errors.New("the SCIM token key must be at least 32 bytes")
	}
	return &Hasher{key: append([]byte(nil), key...)}, nil
}

// DeriveKey derives the SCIM token key from the secret key with HKDF-SHA256.
func DeriveKey(secret []byte) ([]byte, error) {
	k, err := hkdf.Key(sha256.New, secret, nil, keyInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("derive the SCIM token key: %w", err)
	}
	return k, nil
}

// Mint makes a new token for id: the token to show once, and the hash to store.
func (h *Hasher) Mint(id string) (token, hash string, err error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return "", "", fmt.Errorf("mint a SCIM token: %w", err)
	}
	token = prefix + id + "." + base64.RawURLEncoding.EncodeToString(secret)
	return token, h.Hash(token), nil
}

// Hash is the HMAC stored of token.
func (h *Hasher) Hash(token string) string {
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(token))
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}

// Matches reports, in constant time, whether token hashes to stored.
func (h *Hasher) Matches(token, stored string) bool {
	return hmac.Equal([]byte(h.Hash(token)), []byte(stored))
}

// Record is a stored SCIM token: never its secret, only the HMAC of it.
type Record struct {
	System, Tenant, ID, Name, Hash, CreatedBy string
	CreatedAt                                 time.Time
	// ExpiresAt is the zero time for a token that does not expire.
	ExpiresAt time.Time
}
