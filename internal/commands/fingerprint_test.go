package commands_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/ssodir/ssodir/internal/commands"
)

func TestFingerprints(t *testing.T) {
	key, err := commands.DeriveFingerprintKey(bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	f, err := commands.NewFingerprinter(key)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"username":"jdoe","password":"correct horse"}`)
	fp := f.Fingerprint("POST", "/v1/systems/s/tenants/t/users", body)
	unkeyed := sha256.Sum256([]byte("POST\n/v1/systems/s/tenants/t/users\n" + string(body)))

	t.Run("what is stored is keyed: neither the unkeyed hash nor computable without the key", func(t *testing.T) {
		if strings.Contains(fp.Stored, hex.EncodeToString(unkeyed[:])) {
			t.Errorf("the stored fingerprint %q holds the unkeyed SHA-256 of the body", fp.Stored)
		}
		otherKey, _ := commands.DeriveFingerprintKey(bytes.Repeat([]byte{2}, 32))
		other, _ := commands.NewFingerprinter(otherKey)
		if other.Fingerprint("POST", "/v1/systems/s/tenants/t/users", body).Stored == fp.Stored {
			t.Error("another key gives the same fingerprint")
		}
	})
	t.Run("the key derived from the secret is not the secret", func(t *testing.T) {
		if bytes.Equal(key, bytes.Repeat([]byte{1}, 32)) || len(key) != 32 {
			t.Errorf("derived key %x", key)
		}
	})
	t.Run("the same request matches, another does not", func(t *testing.T) {
		if !fp.Matches(f.Fingerprint("POST", "/v1/systems/s/tenants/t/users", body).Stored) {
			t.Error("the same request does not match")
		}
		for _, other := range []commands.RequestFingerprint{
			f.Fingerprint("PUT", "/v1/systems/s/tenants/t/users", body),
			f.Fingerprint("POST", "/v1/systems/s/tenants/t/users/x", body),
			f.Fingerprint("POST", "/v1/systems/s/tenants/t/users", append(body, ' ')),
		} {
			if fp.Matches(other.Stored) {
				t.Errorf("%q matches another request", other.Stored)
			}
		}
	})
	t.Run("records written before keyed fingerprints still match their request until they expire", func(t *testing.T) {
		if !fp.Matches(hex.EncodeToString(unkeyed[:])) {
			t.Error("the unkeyed hash of the same request does not match")
		}
		otherBody := sha256.Sum256([]byte("POST\n/v1/systems/s/tenants/t/users\n{}"))
		if fp.Matches(hex.EncodeToString(otherBody[:])) {
			t.Error("the unkeyed hash of another request matches")
		}
		if fp.Matches("") {
			t.Error("an empty record matches")
		}
	})
	t.Run("a short key is refused", func(t *testing.T) {
		if _, err := commands.NewFingerprinter(make([]byte, 16)); err == nil {
			t.Error("a 16-byte key was accepted")
		}
	})
}
