package commands

import (
	"context"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/events"
)

// ChangePassword sets a user's password; it is always a new version.
type ChangePassword struct {
	Username string
	Password string
}

// ChangePasswordHandler decides ChangePassword.
type ChangePasswordHandler struct {
	deps    Deps
	secrets Encrypter
}

func NewChangePasswordHandler(d Deps, secrets Encrypter) ChangePasswordHandler {
	return ChangePasswordHandler{deps: d, secrets: secrets}
}

func (h ChangePasswordHandler) Handle(ctx context.Context, t Tenant, cmd ChangePassword, m Meta) (events.User, error) {
	var p problems
	checkPassword(&p, cmd.Password)
	if err := p.Err(invalidRequest); err != nil {
		return events.User{}, err
	}
	var result events.User
	err := retry(ctx, func() error {
		agg, err := loadLiveUser(ctx, h.deps, t, cmd.Username)
		if err != nil {
			return err
		}
		if err := checkIfMatch(m, agg.State.Version); err != nil {
			return err
		}
		ciphertext, err := h.secrets.Encrypt(ctx, []byte(cmd.Password), passwordAAD(t, agg.State.Username))
		if err != nil {
			return apperr.Internal(err)
		}
		now := h.deps.now()
		next := agg.State
		next.Version, next.UpdatedAt = agg.State.Version+1, now
		c := Change{
			Event: h.deps.envelope(m, events.KindUser, next.Username, next.Version, now, nil,
				&events.UserPasswordChanged{User: next, PasswordCiphertext: ciphertext}),
			ExpectedVersion: agg.State.Version,
			User:            &UserAggregate{Exists: true, State: next, PasswordCiphertext: ciphertext},
			Idempotency:     m.Idempotency,
			Actor:           m.Actor,
		}
		result = next
		return h.deps.Store.Append(ctx, t, c)
	})
	return result, err
}
