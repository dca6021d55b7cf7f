package commands

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// Places an erasure cleans (GET /erasures/{id} reports each); docs/erasure.md says what
// each covers.
const (
	PlaceWriteModel  = "write_model"
	PlaceReadModel   = "read_model"
	PlaceActivities  = "activities"
	PlaceIdempotency = "idempotency"
	PlaceDeadLetters = "dead_letters"
	PlaceSyncStatus  = "sync_status"
	PlaceKeycloak    = "keycloak"
)

// ErasurePlaces are every place, in the order the erasure reports them.
var ErasurePlaces = []string{PlaceWriteModel, PlaceReadModel, PlaceActivities, PlaceIdempotency, PlaceDeadLetters, PlaceSyncStatus, PlaceKeycloak}

// MaxErasureReason bounds the reason an erasure keeps.
const MaxErasureReason = 1024

// EraseUser erases a person (API.md "Erasure"): the user is deleted as by DeleteUser, in
// the same transaction the erasure's PII-free ledger entry is written, and the user.erased
// record makes the projector and the Keycloak sync erase every trace (docs/erasure.md).
type EraseUser struct {
	Username string
	Reason   string
	// ErasureID is the new erasure's id (the caller makes it, so that it can name the
	// erasure's Location before the command runs).
	ErasureID string
	// AllIncarnations erases the earlier incarnations under the name too (they may have
	// been someone else: by default only the one the name resolves to, the live user or
	// the latest deleted one).
	AllIncarnations bool
}

// EraseUserHandler decides EraseUser.
type EraseUserHandler struct{ del DeleteUserHandler }

func NewEraseUserHandler(d Deps) EraseUserHandler {
	return EraseUserHandler{del: NewDeleteUserHandler(d)}
}

// Validate checks the reason: required, bounded, without control characters.
func (cmd EraseUser) Validate() error {
	r := strings.TrimSpace(cmd.Reason)
	switch {
	case r == "":
		return apperr.InvalidField("reason", "required: why the person is erased")
	case !utf8.ValidString(r) || utf8.RuneCountInString(r) > MaxErasureReason:
		return apperr.InvalidField("reason", "at most 1024 characters")
	case strings.ContainsFunc(r, func(c rune) bool { return c < 0x20 || c == 0x7f }):
		return apperr.InvalidField("reason", "must not contain control characters")
	}
	return nil
}

// mentions reports whether the reason names the person as any of the states given holds
// them (every version of the history, not only the current state): the ledger keeps the
// reason for ever, so it must not hold what the erasure removes.
func (cmd EraseUser) mentions(states ...events.User) bool {
	r := strings.ToLower(cmd.Reason)
	var vals []string
	for _, u := range states {
		vals = append(vals, u.Username, u.Email, u.FirstName, u.LastName)
		for _, vs := range u.Attributes {
			vals = append(vals, vs...)
		}
	}
	for _, v := range vals {
		// Values of one or two characters would refuse most reasons without naming anyone.
		if v := strings.ToLower(strings.TrimSpace(v)); utf8.RuneCountInString(v) >= 3 && strings.Contains(r, v) {
			return true
		}
	}
	return false
}

// Handle records the erasure; it returns the user.erased version. An unknown user, and a
// user erased already or being erased, is 404. A deleted user whose history is still kept
// can be erased: its history holds the person too.
func (h EraseUserHandler) Handle(ctx context.Context, t Tenant, cmd EraseUser, m Meta) (int64, error) {
	if err := cmd.Validate(); err != nil {
		return 0, err
	}
	username, ok := identity.NormalizeUsername(cmd.Username)
	if !ok {
		return 0, apperr.NotFound("user")
	}
	return h.del.remove(ctx, t, username, m, func(agg UserAggregate) error {
		if !agg.Exists || agg.ErasureID != "" {
			return apperr.NotFound("user")
		}
		states := []events.User{agg.State}
		history, err := h.del.deps.Store.UserHistory(ctx, t, username)
		if err != nil {
			return err
		}
		for _, env := range history {
			if u, ok := events.UserState(env.Payload); ok {
				states = append(states, u)
			}
		}
		if cmd.mentions(states...) {
			return apperr.InvalidField("reason", "must not name the person (the erasure ledger keeps the reason)")
		}
		return nil
	}, &cmd)
}
