// Package webhooks delivers a tenant's change feed (internal/changefeed) to the endpoints
// its administrators register (API.md "Changes out", docs/webhooks.md): each change is
// POSTed as its CloudEvent, signed per the Standard Webhooks specification, at least once,
// in feed order per endpoint (so each aggregate's changes in version order), with retries
// for at least a day; an endpoint that fails that long is disabled, with an alert, until it
// is replayed.
//
// The endpoints and their delivery state live in the shared feed table ({p}_events), so
// webhooks add no table per tenant. A deliverer (the projector's) walks the feed for each
// endpoint from the endpoint's own position, under a lease on the endpoint's item, so that
// two projector processes never deliver for one endpoint at once.
package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// SecretPrefix starts every endpoint secret (Standard Webhooks).
const SecretPrefix = "whsec_"

// secretBytes is the size of a secret's random key: above the specification's 24 bytes.
const secretBytes = 32

// Headers of a delivery (Standard Webhooks).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// NewSecret makes a secret: "whsec_" and the base64 of 32 random bytes.
func NewSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// secretKey is the HMAC key of a secret: its base64 part, decoded.
func secretKey(secret string) ([]byte, error) {
	enc, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, errors.New("webhooks: a secret starts with " + SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(key) < 24 {
		return nil, errors.New("webhooks: a secret's key is the base64 of at least 24 bytes")
	}
	return key, nil
}

// Sign is the signature of one message under one secret: "v1," and the base64 of
// HMAC-SHA256(key, id "." timestamp "." body).
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	key, err := secretKey(secret)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(ts.Unix(), 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)), nil
}

// SignHeaders sets the Standard Webhooks headers of a message on h: webhook-signature holds
// one signature per secret (two while a rotated secret is still valid), space-separated.
func SignHeaders(h http.Header, secrets []string, id string, ts time.Time, body []byte) error {
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		sig, err := Sign(s, id, ts, body)
		if err != nil {
			return err
		}
		sigs = append(sigs, sig)
	}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, strings.Join(sigs, " "))
	return nil
}
