package commands

import (
	"context"

	"github.com/ssodir/ssodir/internal/events"
)

// SetUserActive deactivates (Active false) or activates a user. Doing what is already so
// records nothing.
type SetUserActive struct {
	Username string
	Active   bool
}

// SetUserActiveHandler decides SetUserActive.
type SetUserActiveHandler struct{ deps Deps }

func NewSetUserActiveHandler(d Deps) SetUserActiveHandler { return SetUserActiveHandler{deps: d} }

func (h SetUserActiveHandler) Handle(ctx context.Context, t Tenant, cmd SetUserActive, m Meta) (events.User, error) {
	var result events.User
	err := retry(ctx, func() error {
		agg, err := loadLiveUser(ctx, h.deps, t, cmd.Username)
		if err != nil {
			return err
		}
		if err := checkIfMatch(m, agg.State.Version); err != nil {
			return err
		}
		if agg.State.IsActive == cmd.Active {
			result = agg.State
			return h.deps.recordNoop(ctx, t, m, events.KindUser, agg.State.Username, agg.State.Version)
		}
		now := h.deps.now()
		next := agg.State
		next.IsActive, next.Version, next.UpdatedAt = cmd.Active, agg.State.Version+1, now
		var payload events.Payload = &events.UserDeactivated{User: next}
		if cmd.Active {
			payload = &events.UserActivated{User: next}
		}
		c := Change{
			Event:           h.deps.envelope(m, events.KindUser, next.Username, next.Version, now, userChanges(agg.State, next), payload),
			ExpectedVersion: agg.State.Version,
			User:            &UserAggregate{Exists: true, State: next, PasswordCiphertext: agg.PasswordCiphertext},
			Idempotency:     m.Idempotency,
			Actor:           m.Actor,
		}
		result = next
		return h.deps.Store.Append(ctx, t, c)
	})
	return result, err
}
