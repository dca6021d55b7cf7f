package commands

import (
	"context"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// maxAttempts bounds how often a tenant row update is tried again after losing a race.
const maxAttempts = 8

// maxRetries bounds how often a command is decided again after losing a race that the
// client did not cause (another writer moved the version it had not pinned with If-Match).
// Every lost race is another writer's commit, so with n writers on one aggregate the last
// one loses up to n-1 times; the bound is a count, so a slow machine does not turn
// contention into 503s.
const maxRetries = 64

// Deps are what every handler needs besides its store.
type Deps struct {
	Store Store
	Now   Clock
	NewID IDs
	// Log receives what a handler cannot return: the failure of work done after its
	// command was recorded. nil logs nothing.
	Log *zap.Logger
}

func (d Deps) now() time.Time { return d.Now().UTC().Truncate(time.Millisecond) }

func (d Deps) log() *zap.Logger {
	if d.Log == nil {
		return zap.NewNop()
	}
	return d.Log
}

// cleanupFailed logs a delete's clean-up that did not finish: the delete is answered as
// done, and the next create of the name finishes the clean-up.
func (d Deps) cleanupFailed(t Tenant, kind events.AggregateKind, key string, version int64, left int, err error) {
	d.log().Warn("the clean-up after a delete did not finish; the next create of the name finishes it",
		zap.String("tenant", t.System+"/"+t.ID), zap.String("aggregate", identity.LogKey(string(kind)+"#"+key)),
		zap.Int64("version", version), zap.Int("memberships_left", left), zap.Error(err))
}

// checkIfMatch enforces a client's If-Match against the aggregate's current version.
func checkIfMatch(m Meta, current int64) error {
	if m.IfMatch != nil && *m.IfMatch != current {
		return apperr.VersionMismatch(*m.IfMatch, current)
	}
	return nil
}

// retry runs decide-and-append again while it loses races on state the client did not pin.
// A client that sent If-Match gets 412 on the next attempt, from checkIfMatch.
func retry(ctx context.Context, attempt func() error) error {
	var err error
	for i := range maxRetries {
		err = attempt()
		if !lostRace(err) {
			return err
		}
		// Full jitter, so that the losers of one race do not all meet again in the next.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(rand.N(time.Duration(min(1<<min(i, 5), 32)) * time.Millisecond)):
		}
	}
	return apperr.Unavailable(err, time.Second)
}

func (d Deps) envelope(m Meta, kind events.AggregateKind, key string, version int64, at time.Time,
	changes map[string]events.Change, p events.Payload) events.Envelope {
	return events.Envelope{
		EventID:       d.NewID(),
		Type:          p.EventType(),
		SchemaVersion: events.SchemaVersion,
		Kind:          kind,
		Key:           key,
		Version:       version,
		Actor:         m.Actor,
		CommandID:     m.CommandID,
		CorrelationID: m.CorrelationID,
		OccurredAt:    at,
		Changes:       changes,
		Payload:       p,
	}
}

// recordNoop records an idempotent request that changed nothing, so that its key is taken.
func (d Deps) recordNoop(ctx context.Context, t Tenant, m Meta, kind events.AggregateKind, key string, version int64) error {
	if m.Idempotency == nil {
		return nil
	}
	return d.Store.RecordNoop(ctx, t, *m.Idempotency, m.CommandID, kind, key, version)
}

// change adds an entry when a field's value differs; empty strings and maps are absent.
func change(ch map[string]events.Change, field string, old, new any) {
	if reflect.DeepEqual(normal(old), normal(new)) {
		return
	}
	ch[field] = events.Change{Old: normal(old), New: normal(new)}
}

func normal(v any) any {
	switch x := v.(type) {
	case string:
		if x == "" {
			return nil
		}
	case map[string][]string:
		if len(x) == 0 {
			return nil
		}
	}
	return v
}

// userChanges is the field-level change set between two user states; never a password.
func userChanges(old, new events.User) map[string]events.Change {
	ch := map[string]events.Change{}
	change(ch, "email", old.Email, new.Email)
	change(ch, "first_name", old.FirstName, new.FirstName)
	change(ch, "last_name", old.LastName, new.LastName)
	if old.IsActive != new.IsActive || old.Deleted != new.Deleted || new.Deleted {
		change(ch, "is_active", activeOf(old), activeOf(new))
	}
	change(ch, "attributes", old.Attributes, new.Attributes)
	return ch
}

func activeOf(u events.User) any {
	if u.Username == "" || u.Deleted {
		return nil
	}
	return u.IsActive
}

// groupChanges is the field-level change set between two group states.
func groupChanges(old, new events.Group) map[string]events.Change {
	ch := map[string]events.Change{}
	change(ch, "name", old.Name, new.Name)
	change(ch, "description", old.Description, new.Description)
	change(ch, "attributes", old.Attributes, new.Attributes)
	return ch
}

func cloneAttrs(a map[string][]string) map[string][]string {
	if len(a) == 0 {
		return nil
	}
	out := make(map[string][]string, len(a))
	for k, v := range a {
		out[k] = slices.Clone(v)
	}
	return out
}

func equalAttrs(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	return maps.EqualFunc(a, b, func(x, y []string) bool { return slices.Equal(x, y) })
}

func passwordAAD(t Tenant, username string) string {
	return "password:" + t.System + "/" + t.ID + "/" + username
}

// UserLookups are the pointers of a user's state: none for a deleted or absent user.
func UserLookups(u events.User) []Lookup {
	if u.Deleted || u.ID == "" {
		return nil
	}
	return aggregateLookups(events.KindUser, u.ID, u.Username, u.Attributes)
}

// GroupLookups are the pointers of a group's state: none for a deleted or absent group.
func GroupLookups(g events.Group) []Lookup {
	if g.Deleted || g.ID == "" {
		return nil
	}
	return aggregateLookups(events.KindGroup, g.ID, g.Key, g.Attributes)
}

func aggregateLookups(kind events.AggregateKind, id, key string, attrs map[string][]string) []Lookup {
	out := []Lookup{{Kind: kind, By: LookupByID, Value: id, ID: id, Key: key}}
	if ext := identity.ExternalID(attrs); ext != "" {
		out = append(out, Lookup{Kind: kind, By: LookupByExternalID, Value: ext, ID: id, Key: key})
	}
	return out
}

// lookupChanges are the pointers to write and to remove when an aggregate's state goes
// from one with the pointers old to one with the pointers new.
func lookupChanges(old, new []Lookup) (put, del []Lookup) {
	for _, n := range new {
		if !slices.Contains(old, n) {
			put = append(put, n)
		}
	}
	for _, o := range old {
		if !slices.Contains(new, o) {
			del = append(del, o)
		}
	}
	return put, del
}

// lateWriterCounts are the counts of user deletes that cover usernames, for a change that
// records users in a group's history (ChangeMembers, AddMember, RemoveMember): read before
// the users are, and set as the change's DeleteCounts, on which its transaction
// conditions. A user deleted or erased after this read makes the change decide again and
// find the user gone, so that no group record written after an erasure began can name its
// person (docs/erasure.md, "No late writer").
func (d Deps) lateWriterCounts(ctx context.Context, t Tenant, usernames []string) (DeleteCounts, error) {
	return d.Store.UserDeleteCounts(ctx, t, usernames)
}
