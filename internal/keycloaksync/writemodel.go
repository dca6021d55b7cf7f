package keycloaksync

import (
	"context"
	"strings"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
	"github.com/ssodir/ssodir/internal/keycloak"
)

// WriteModel is one tenant's write model as the sync consults it: strongly consistent
// reads of the tenant's command table, never the read model (which may lag).
type WriteModel struct {
	store  *dynamo.CommandStore
	tenant commands.Tenant
}

var _ keycloak.WriteModel = (*WriteModel)(nil)

// NewWriteModel reads the tenant's write model through store.
func NewWriteModel(store *dynamo.CommandStore, system, tenant string) *WriteModel {
	return &WriteModel{store: store, tenant: commands.Tenant{System: system, ID: tenant}}
}

// user is the live user with its current password ciphertext.
func (w *WriteModel) user(ctx context.Context, username string) (events.User, string, bool, error) {
	name, valid := identity.NormalizeUsername(username)
	if !valid {
		return events.User{}, "", false, nil // no directory user can have that name
	}
	agg, err := w.store.LoadUser(ctx, w.tenant, name)
	if err != nil || !agg.Exists || agg.State.Deleted {
		return events.User{}, "", false, err
	}
	return agg.State, agg.PasswordCiphertext, true, nil
}

// User is the live user with that username.
func (w *WriteModel) User(ctx context.Context, username string) (keycloak.DirectoryUser, bool, error) {
	u, _, ok, err := w.user(ctx, username)
	if !ok {
		return keycloak.DirectoryUser{}, false, err
	}
	return directoryUser(u), true, nil
}

func (w *WriteModel) group(ctx context.Context, name string) (events.Group, bool, error) {
	agg, err := w.store.LoadGroup(ctx, w.tenant, identity.GroupKey(name))
	if err != nil || !agg.Exists || agg.State.Deleted {
		return events.Group{}, false, err
	}
	return agg.State, true, nil
}

// Group is the live group with that name.
func (w *WriteModel) Group(ctx context.Context, name string) (keycloak.DirectoryGroup, bool, error) {
	g, ok, err := w.group(ctx, name)
	if !ok {
		return keycloak.DirectoryGroup{}, false, err
	}
	return directoryGroup(g), true, nil
}

// Member reports the membership of the user in the group, if there is one now.
func (w *WriteModel) Member(ctx context.Context, groupName, username string) (string, string, bool, error) {
	m, ok, err := w.store.CurrentMembership(ctx, w.tenant, identity.GroupKey(groupName), strings.ToLower(username))
	return m.GroupID, m.UserID, ok, err
}

// Members are the current memberships in the group of those of the usernames that have
// one, in one read (keyed by the lower-cased username).
func (w *WriteModel) Members(ctx context.Context, groupName string, usernames []string) (map[string]dynamo.Membership, error) {
	names := make([]string, len(usernames))
	for i, u := range usernames {
		names[i] = strings.ToLower(u)
	}
	return w.store.CurrentMemberships(ctx, w.tenant, identity.GroupKey(groupName), names)
}
