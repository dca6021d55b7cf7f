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
		states, err := h.historyStates(ctx, t, username, agg.State, cmd.AllIncarnations)
		if err != nil {
			return err
		}
		if cmd.mentions(states...) {
			return apperr.InvalidField("reason", "must not name the person (the erasure ledger keeps the reason)")
		}
		return nil
	}, &cmd)
}

// historyStates are the states the reason is checked against: every version under the
// username (every incarnation's: the name's history), and the versions the erased
// incarnations left under their former names (a person renamed: docs/erasure.md, "Former
// names"), told there from the name's other holders by the incarnations' ids. The erased
// incarnations are the one the name resolves to (from its user.created or the rename
// that brought it to the name on), or with allIncarnations every one under the name.
func (h EraseUserHandler) historyStates(ctx context.Context, t Tenant, username string, current events.User, allIncarnations bool) ([]events.User, error) {
	history, err := h.del.deps.Store.UserHistory(ctx, t, username)
	if err != nil {
		return nil, err
	}
	states := []events.User{current}
	from := int64(0) // the first version of the erased incarnations
	if !allIncarnations {
		for _, env := range history {
			switch env.Payload.(type) {
			case *events.UserCreated, *events.UserRenamed:
				from = env.Version
			}
		}
	}
	ids := map[string]bool{}
	var former []events.FormerName
	erased := func(u events.User) {
		if u.ID != "" {
			ids[u.ID] = true
		}
		former = append(former, u.FormerNames...)
	}
	if current.ID != "" {
		erased(current)
	}
	for _, env := range history {
		u, ok := events.UserState(env.Payload)
		if !ok {
			continue
		}
		states = append(states, u)
		if env.Version >= from {
			erased(u)
			switch p := env.Payload.(type) {
			case *events.UserDeleted:
				ids[p.PreviousID] = true
			case *events.UserErased:
				ids[p.PreviousID] = true
			}
		}
	}
	seen := map[string]bool{username: true}
	for _, f := range former {
		if seen[f.Username] {
			continue
		}
		seen[f.Username] = true
		earlier, err := h.del.deps.Store.UserHistory(ctx, t, f.Username)
		if err != nil {
			return nil, err
		}
		for _, env := range earlier {
			if u, ok := events.UserState(env.Payload); ok && u.ID != "" && ids[u.ID] {
				states = append(states, u)
			}
		}
	}
	return states, nil
}
