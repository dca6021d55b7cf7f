package commands

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/events"
)

// CreateUser creates a user, or creates it again after a delete (continuing its versions).
type CreateUser struct {
	Username   string
	Email      string
	FirstName  string
	LastName   string
	IsActive   *bool
	Attributes map[string][]string
	Password   *string
}

// CreateUserHandler decides CreateUser.
type CreateUserHandler struct {
	deps    Deps
	secrets Encrypter
}

func NewCreateUserHandler(d Deps, secrets Encrypter) CreateUserHandler {
	return CreateUserHandler{deps: d, secrets: secrets}
}

// Validate normalises the command and reports every invalid field.
func (c *CreateUser) Validate() error {
	var p problems
	c.Username = checkUsername(&p, "username", c.Username)
	c.Email = checkEmail(&p, c.Email)
	checkText(&p, "first_name", c.FirstName, maxName, false)
	checkText(&p, "last_name", c.LastName, maxName, false)
	checkAttributes(&p, c.Attributes)
	if c.Password != nil {
		checkPassword(&p, *c.Password)
	}
	return p.Err(invalidRequest)
}

func (h CreateUserHandler) Handle(ctx context.Context, t Tenant, cmd CreateUser, m Meta) (events.User, error) {
	if err := cmd.Validate(); err != nil {
		return events.User{}, err
	}
	var ciphertext string
	if cmd.Password != nil {
		var err error
		if ciphertext, err = h.secrets.Encrypt(ctx, []byte(*cmd.Password), passwordAAD(t, cmd.Username)); err != nil {
			return events.User{}, apperr.Internal(err)
		}
	}
	var created events.User
	// The first attempt assumes the name was never used, the common case, so that a create
	// costs one transaction and no read; if it was, the transaction's version condition
	// fails and the next attempt reads what is there.
	fresh := true
	err := retry(ctx, func() error {
		var agg UserAggregate
		if !fresh {
			var err error
			if agg, err = h.deps.Store.LoadUser(ctx, t, cmd.Username); err != nil {
				return err
			}
		}
		fresh = false
		if agg.Live() {
			return apperr.Conflict(apperr.CodeUsernameTaken, "username already in use")
		}
		// The name's memberships may still be moving away from it (a rename).
		if waited, err := h.deps.settleUser(ctx, t, agg, ""); err != nil || waited {
			return cmp.Or(err, ErrVersionConflict)
		}
		if agg.ErasureID != "" {
			// The name's erasure removes its partition; a user made in it now would go too.
			return apperr.Unavailable(errors.New("the username is being erased"), time.Minute)
		}
		if agg.CleanupPending {
			if err := finishUserCleanup(ctx, h.deps.Store, t, agg); err != nil {
				return err
			}
		}
		now := h.deps.now()
		active := cmd.IsActive == nil || *cmd.IsActive
		created = events.User{
			ID: h.deps.NewID(), Username: cmd.Username, Email: cmd.Email,
			FirstName: cmd.FirstName, LastName: cmd.LastName, IsActive: active,
			Attributes: cloneAttrs(cmd.Attributes), Version: agg.State.Version + 1,
			CreatedAt: now, UpdatedAt: now, DeletedMembershipRev: agg.State.DeletedMembershipRev,
		}
		payload := &events.UserCreated{User: created, PasswordCiphertext: ciphertext}
		put, del := lookupChanges(UserLookups(agg.State), UserLookups(created))
		c := Change{
			PutLookups: put, DeleteLookups: del,
			Event:           h.deps.envelope(m, events.KindUser, cmd.Username, created.Version, now, userChanges(events.User{}, created), payload),
			ExpectedVersion: agg.State.Version,
			User:            &UserAggregate{Exists: true, State: created, PasswordCiphertext: ciphertext},
			ClaimEmail:      created.Email,
			Idempotency:     m.Idempotency,
			Actor:           m.Actor,
		}
		return h.deps.Store.Append(ctx, t, c)
	})
	if errors.Is(err, ErrEmailTaken) {
		return events.User{}, apperr.Conflict(apperr.CodeEmailTaken, "email already in use")
	}
	return created, err
}

// finishUserCleanup removes the memberships a delete left behind before the username is
// used again, so the new user does not inherit them.
func finishUserCleanup(ctx context.Context, s Store, t Tenant, agg UserAggregate) error {
	_, groups, err := s.UserMemberships(ctx, t, agg.State.Username)
	if err != nil {
		return err
	}
	ms := make([]Membership, 0, len(groups))
	for _, g := range groups {
		ms = append(ms, Membership{GroupKey: g, Username: agg.State.Username})
	}
	return s.RemoveMembersAfter(ctx, t, Cleanup{Kind: events.KindUser, Key: agg.State.Username, Version: agg.State.Version,
		MembershipRev: agg.State.DeletedMembershipRev, Members: ms})
}
