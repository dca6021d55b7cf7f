package commands

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// fingerprintPrefix marks a keyed fingerprint in the idempotency table. Records without it
// hold the unkeyed SHA-256 of earlier versions; they expire 24 h after they were written.
const fingerprintPrefix = "hmac-sha256:"

// fingerprintKeyInfo separates the fingerprint key from every other key derived from the
// same secret.
const fingerprintKeyInfo = "ssodir command-api idempotency fingerprint v1"

// Fingerprinter fingerprints Idempotency-Key requests (method, path and body) with
// HMAC-SHA256 under a key the database does not hold. The body of POST /users and PUT
// …/password holds a password, so an unkeyed hash stored for 24 h could be brute-forced
// offline by anyone who reads the table; a keyed one cannot without the key.
type Fingerprinter struct{ key []byte }

// NewFingerprinter fingerprints under key (SSO_IDEMPOTENCY_KEY, or DeriveFingerprintKey of
// the secret key); every command-api instance must use the same one.
func NewFingerprinter(key []byte) (*Fingerprinter, error) {
	if len(key) < 32 {
		return nil, errors.New("the idempotency fingerprint key must be at least 32 bytes")
	}
	return &Fingerprinter{key: append([]byte(nil), key...)}, nil
}

// DeriveFingerprintKey derives the fingerprint key from the secret key with HKDF-SHA256,
// so the secret is never used for two purposes and the derived key is never stored.
func DeriveFingerprintKey(secret []byte) ([]byte, error) {
	k, err := hkdf.Key(sha256.New, secret, nil, fingerprintKeyInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("derive the idempotency fingerprint key: %w", err)
	}
	return k, nil
}

// Fingerprint is the request's fingerprint as the idempotency record keeps it.
func (f *Fingerprinter) Fingerprint(method, path string, body []byte) RequestFingerprint {
	m := hmac.New(sha256.New, f.key)
	m.Write([]byte(method + "\n" + path + "\n"))
	m.Write(body)
	legacy := sha256.New()
	legacy.Write([]byte(method + "\n" + path + "\n"))
	legacy.Write(body)
	return RequestFingerprint{
		Stored: fingerprintPrefix + hex.EncodeToString(m.Sum(nil)),
		legacy: hex.EncodeToString(legacy.Sum(nil)),
	}
}

// RequestFingerprint is one request's fingerprint: Stored is what a first request records;
// Matches also recognises the unkeyed hash of records written before keyed fingerprints,
// which is never written again.
type RequestFingerprint struct {
	Stored string
	legacy string
}

// Matches reports whether a recorded fingerprint is this request's.
func (r RequestFingerprint) Matches(recorded string) bool {
	if strings.HasPrefix(recorded, fingerprintPrefix) {
		return hmac.Equal([]byte(recorded), []byte(r.Stored))
	}
	return r.legacy != "" && hmac.Equal([]byte(recorded), []byte(r.legacy))
}
