// Package secrets encrypts passwords and Keycloak client secrets at rest with AES-256-GCM,
// under a local key (development, SSO_SECRET_KEY) or AWS KMS envelope encryption
// (SSO_KMS_KEY_ID).
//
// A ciphertext is printable and self-describing:
//
//	v1.local.<nonce|sealed>
//	v1.kms.<KMS-encrypted data key>.<nonce|sealed>
//
// with each part in unpadded base64url. The GCM additional data is the header (everything
// before the sealed part) followed by the caller's aad, so neither the format, the data key
// nor the record a ciphertext belongs to can be swapped.
package secrets

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

const (
	localPrefix = "v1.local."
	kmsPrefix   = "v1.kms."
	keySize     = 32
	// maxEncryptedKey bounds what is sent to KMS; its data-key blobs are a few hundred bytes.
	maxEncryptedKey = 1024
)

// ErrCiphertext is returned (wrapped) when a ciphertext is malformed, was tampered with, or
// does not match the box's key or the given aad.
var ErrCiphertext = errors.New("secrets: invalid ciphertext, or wrong key or context")

// Strict so that every ciphertext has exactly one spelling.
var b64 = base64.RawURLEncoding.Strict()

// Box encrypts and decrypts small secrets. It is safe for concurrent use.
type Box struct {
	local cipher.AEAD // set by NewLocal
	kms   *kmsKeys    // set by NewKMS
}

// NewLocal returns a Box using a 32-byte key directly; each message gets a random 96-bit nonce.
func NewLocal(key []byte) (*Box, error) {
	if len(key) != keySize {
		return nil, fmt.Errorf("secrets: local key must be %d bytes, got %d", keySize, len(key))
	}
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	return &Box{local: aead}, nil
}

// Encrypt seals plaintext, bound to aad (e.g. "password:acme/eu/jdoe").
func (b *Box) Encrypt(ctx context.Context, plaintext []byte, aad string) (string, error) {
	if b.local != nil {
		return seal(b.local, localPrefix, plaintext, aad), nil
	}
	dk, err := b.kms.current(ctx)
	if err != nil {
		return "", err
	}
	return seal(dk.aead, kmsPrefix+b64.EncodeToString(dk.encrypted)+".", plaintext, aad), nil
}

// Decrypt opens a ciphertext made by Encrypt with the same kind of key and the same aad.
func (b *Box) Decrypt(ctx context.Context, ciphertext string, aad string) ([]byte, error) {
	switch {
	case strings.HasPrefix(ciphertext, localPrefix):
		if b.local == nil {
			return nil, fmt.Errorf("%w: local ciphertext given to a KMS box", ErrCiphertext)
		}
		sealed, err := decodeSealed(ciphertext[len(localPrefix):])
		if err != nil {
			return nil, err
		}
		return open(b.local, localPrefix, sealed, aad)

	case strings.HasPrefix(ciphertext, kmsPrefix):
		if b.kms == nil {
			return nil, fmt.Errorf("%w: KMS ciphertext given to a local box", ErrCiphertext)
		}
		keyText, sealedText, ok := strings.Cut(ciphertext[len(kmsPrefix):], ".")
		if !ok {
			return nil, fmt.Errorf("%w: malformed", ErrCiphertext)
		}
		encrypted, err := b64.DecodeString(keyText)
		if err != nil || len(encrypted) == 0 || len(encrypted) > maxEncryptedKey {
			return nil, fmt.Errorf("%w: malformed data key", ErrCiphertext)
		}
		// Validate the cheap part before asking KMS anything.
		sealed, err := decodeSealed(sealedText)
		if err != nil {
			return nil, err
		}
		aead, err := b.kms.key(ctx, encrypted)
		if err != nil {
			return nil, err
		}
		return open(aead, kmsPrefix+keyText+".", sealed, aad)

	default:
		return nil, fmt.Errorf("%w: unknown format", ErrCiphertext)
	}
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	// Prepends a fresh random 96-bit nonce to every sealed message.
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	return aead, nil
}

func seal(aead cipher.AEAD, header string, plaintext []byte, aad string) string {
	return header + b64.EncodeToString(aead.Seal(nil, nil, plaintext, []byte(header+aad)))
}

func decodeSealed(text string) ([]byte, error) {
	sealed, err := b64.DecodeString(text)
	if err != nil {
		return nil, fmt.Errorf("%w: malformed", ErrCiphertext)
	}
	return sealed, nil
}

// open relies on the header being self-delimiting (it ends at a fixed '.'), so header+aad is
// unambiguous.
func open(aead cipher.AEAD, header string, sealed []byte, aad string) ([]byte, error) {
	if len(sealed) < aead.Overhead() {
		return nil, fmt.Errorf("%w: truncated", ErrCiphertext)
	}
	plaintext, err := aead.Open(nil, nil, sealed, []byte(header+aad))
	if err != nil {
		return nil, ErrCiphertext
	}
	return plaintext, nil
}
