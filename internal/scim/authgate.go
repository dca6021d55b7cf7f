package scim

import (
	"context"
	"time"

	"github.com/ssodir/ssodir/internal/auth"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
)

// A SCIM token is checked against its stored HMAC with a read of its row on every request
// (a revoke takes effect at once). That read runs beside the request's own first reads
// instead of before them, so that it adds no round trip: every write (guardedStore) and
// every answer (call.write, call.noContent, dispatch's errors) waits for the check first,
// so a request with a bad token writes nothing and learns nothing but 401.

// authCheck is one request's token check, running.
type authCheck struct {
	done chan struct{}
	err  error
}

type authCheckKey struct{}

// startCheck runs verify in the background and returns the context that carries it.
func startCheck(ctx context.Context, verify func(context.Context) (auth.Principal, error)) context.Context {
	chk := &authCheck{done: make(chan struct{})}
	go func() {
		defer close(chk.done)
		_, chk.err = verify(ctx)
	}()
	return context.WithValue(ctx, authCheckKey{}, chk)
}

// awaitAuth waits for the request's token check, if it has one, and returns its error.
func awaitAuth(ctx context.Context) error {
	chk, ok := ctx.Value(authCheckKey{}).(*authCheck)
	if !ok {
		return nil
	}
	select {
	case <-chk.done:
		return chk.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// guardedStore is the write model as the command handlers of this port see it: every
// write waits for the request's token check.
type guardedStore struct{ commands.Store }

func (s guardedStore) Append(ctx context.Context, t commands.Tenant, c commands.Change) error {
	if err := awaitAuth(ctx); err != nil {
		return err
	}
	return s.Store.Append(ctx, t, c)
}

func (s guardedStore) RemoveMembersAfter(ctx context.Context, t commands.Tenant, c commands.Cleanup) error {
	if err := awaitAuth(ctx); err != nil {
		return err
	}
	return s.Store.RemoveMembersAfter(ctx, t, c)
}

func (s guardedStore) WriteMembers(ctx context.Context, t commands.Tenant, w commands.MembersWrite, before func(context.Context) error) error {
	if err := awaitAuth(ctx); err != nil {
		return err
	}
	return s.Store.WriteMembers(ctx, t, w, before)
}

func (s guardedStore) UndoMembers(ctx context.Context, t commands.Tenant, groupKey string, version int64, members []events.Member) error {
	if err := awaitAuth(ctx); err != nil {
		return err
	}
	return s.Store.UndoMembers(ctx, t, groupKey, version, members)
}

func (s guardedStore) LeaseMembers(ctx context.Context, t commands.Tenant, groupKey string, l commands.MembersLease, now time.Time) (bool, error) {
	if err := awaitAuth(ctx); err != nil {
		return false, err
	}
	return s.Store.LeaseMembers(ctx, t, groupKey, l, now)
}

func (s guardedStore) FinishMembers(ctx context.Context, t commands.Tenant, groupKey string, l commands.MembersLease) error {
	if err := awaitAuth(ctx); err != nil {
		return err
	}
	return s.Store.FinishMembers(ctx, t, groupKey, l)
}

func (s guardedStore) RecordNoop(ctx context.Context, t commands.Tenant, idem commands.Idempotency, commandID string, kind events.AggregateKind, key string, version int64) error {
	if err := awaitAuth(ctx); err != nil {
		return err
	}
	return s.Store.RecordNoop(ctx, t, idem, commandID, kind, key, version)
}
