package webhooks

import (
	"crypto/hkdf"
	"crypto/sha256"
	"errors"

	"github.com/ssodir/ssodir/internal/secrets"
)

// ErrNoKey is a process with neither SSO_WEBHOOK_KEY nor SSO_SECRET_KEY.
var ErrNoKey = errors.New("webhooks: SSO_WEBHOOK_KEY (or SSO_SECRET_KEY to derive it from) is required")

// NewBox is the box of the endpoints' secrets (AES-256-GCM, internal/secrets): under
// SSO_WEBHOOK_KEY, or a key derived from SSO_SECRET_KEY with HKDF. Not the KMS key of
// passwords: the projector, which delivers and so reads the secrets, must not hold that.
func NewBox(webhookKey, secretKey []byte) (*secrets.Box, error) {
	key := webhookKey
	if len(key) > 32 {
		key = key[:32]
	}
	if key == nil {
		if secretKey == nil {
			return nil, ErrNoKey
		}
		var err error
		if key, err = hkdf.Key(sha256.New, secretKey, nil, "ssodir webhook secrets", 32); err != nil {
			return nil, err
		}
	}
	return secrets.NewLocal(key)
}
