package commands

import (
	"context"
	"errors"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// UpdateUser changes a user's profile; nil fields stay as they are, and Attributes, when
// set, replaces the whole map. Clear* empties a field.
type UpdateUser struct {
	Username   string
	Email      *string
	FirstName  *string
	LastName   *string
	Attributes *map[string][]string
}

// UpdateUserHandler decides UpdateUser.
type UpdateUserHandler struct{ deps Deps }

func NewUpdateUserHandler(d Deps) UpdateUserHandler { return UpdateUserHandler{deps: d} }

func (c *UpdateUser) Validate() error {
	var p problems
	if c.Email != nil {
		e := checkEmail(&p, *c.Email)
		c.Email = &e
	}
	if c.FirstName != nil {
		checkText(&p, "first_name", *c.FirstName, maxName, false)
	}
	if c.LastName != nil {
		checkText(&p, "last_name", *c.LastName, maxName, false)
	}
	if c.Attributes != nil {
		checkAttributes(&p, *c.Attributes)
	}
	return p.Err(invalidRequest)
}

func (h UpdateUserHandler) Handle(ctx context.Context, t Tenant, cmd UpdateUser, m Meta) (events.User, error) {
	if err := cmd.Validate(); err != nil {
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
		old, next := agg.State, agg.State
		if cmd.Email != nil {
			next.Email = *cmd.Email
		}
		if cmd.FirstName != nil {
			next.FirstName = *cmd.FirstName
		}
		if cmd.LastName != nil {
			next.LastName = *cmd.LastName
		}
		if cmd.Attributes != nil {
			next.Attributes = cloneAttrs(*cmd.Attributes)
		}
		changes := userChanges(old, next)
		if len(changes) == 0 {
			result = old
			return h.deps.recordNoop(ctx, t, m, events.KindUser, cmd.Username, old.Version)
		}
		now := h.deps.now()
		next.Version, next.UpdatedAt = old.Version+1, now
		put, del := lookupChanges(UserLookups(old), UserLookups(next))
		c := Change{
			PutLookups: put, DeleteLookups: del,
			Event:           h.deps.envelope(m, events.KindUser, cmd.Username, next.Version, now, changes, &events.UserUpdated{User: next}),
			ExpectedVersion: old.Version,
			User:            &UserAggregate{Exists: true, State: next, PasswordCiphertext: agg.PasswordCiphertext},
			Idempotency:     m.Idempotency,
			Actor:           m.Actor,
		}
		if next.Email != old.Email {
			c.ClaimEmail, c.ReleaseEmail = next.Email, old.Email
		}
		result = next
		return h.deps.Store.Append(ctx, t, c)
	})
	if errors.Is(err, ErrEmailTaken) {
		return events.User{}, apperr.Conflict(apperr.CodeEmailTaken, "email already in use")
	}
	return result, err
}

// loadLiveUser loads a user that must exist and not be deleted, with no rename of it
// being made: one that is, is waited for or finished first (settleUser).
func loadLiveUser(ctx context.Context, d Deps, t Tenant, username string) (UserAggregate, error) {
	return loadLiveUserAs(ctx, d, t, username, "")
}

// loadLiveUserAs is loadLiveUser for the renamer whose own mark own is not in its way.
func loadLiveUserAs(ctx context.Context, d Deps, t Tenant, username, own string) (UserAggregate, error) {
	u, ok := identity.NormalizeUsername(username)
	if !ok {
		return UserAggregate{}, apperr.NotFound("user")
	}
	for {
		agg, err := d.Store.LoadUser(ctx, t, u)
		if err != nil {
			return agg, err
		}
		if !agg.Live() {
			return agg, apperr.NotFound("user")
		}
		if waited, err := d.settleUser(ctx, t, agg, own); err != nil || !waited {
			return agg, err
		}
	}
}
