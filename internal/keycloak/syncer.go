package keycloak

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
)

// Syncer applies single directory events to one realm: the event-driven half of the sync,
// between full reconciles. Every method finds its Keycloak object by ssodir_id, is
// idempotent (an event delivered twice, or after a reconcile already did the work, changes
// nothing), and treats "already gone" as done for removals.
//
// Keycloak ids are cached per directory id. The cache is only a shortcut: a cached id is
// checked (by the read that precedes every update, or by a 404 from a membership change)
// and looked up again by ssodir_id when it no longer fits, so objects recreated or renamed
// in Keycloak are still found. A Syncer is safe for concurrent use, but events of one
// aggregate must be applied in order by the caller.
type Syncer struct {
	c        *Client
	preserve []string

	mu     sync.Mutex
	users  map[string]string
	groups map[string]string
}

// SyncerOptions shape a Syncer.
type SyncerOptions struct {
	// PreserveAttributes are user attributes kept from Keycloak; nil means
	// DefaultPreservedAttributes. Use the same list as the reconcile's PlanOptions.
	PreserveAttributes []string
}

// NewSyncer returns a Syncer for the client's realm.
func NewSyncer(c *Client, opts SyncerOptions) *Syncer {
	preserve := opts.PreserveAttributes
	if preserve == nil {
		preserve = DefaultPreservedAttributes
	}
	return &Syncer{c: c, preserve: preserve, users: map[string]string{}, groups: map[string]string{}}
}

func (s *Syncer) cached(m map[string]string, id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := m[id]
	return v, ok
}

func (s *Syncer) remember(m map[string]string, id, kcID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m[id] = kcID
}

func (s *Syncer) forget(m map[string]string, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(m, id)
}

// findUser returns the Keycloak user that carries ssodir_id = id, or ErrNotFound.
func (s *Syncer) findUser(ctx context.Context, id string) (*User, error) {
	if kcID, ok := s.cached(s.users, id); ok {
		u, err := s.c.GetUser(ctx, kcID)
		if err == nil && u.SsodirID() == id {
			return u, nil
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		s.forget(s.users, id)
	}
	users, err := s.c.FindUsersByAttribute(ctx, AttrSsodirID, id)
	if err != nil {
		return nil, err
	}
	switch len(users) {
	case 0:
		return nil, fmt.Errorf("keycloak: user with ssodir_id %s: %w", id, ErrNotFound)
	case 1:
		s.remember(s.users, id, users[0].ID)
		return &users[0], nil
	}
	return nil, fmt.Errorf("keycloak: %d users carry ssodir_id %s: %w", len(users), id, ErrConflict)
}

// findGroup returns the Keycloak group that carries ssodir_id = id, or ErrNotFound.
func (s *Syncer) findGroup(ctx context.Context, id string) (*Group, error) {
	if kcID, ok := s.cached(s.groups, id); ok {
		g, err := s.c.GetGroup(ctx, kcID)
		if err == nil && g.SsodirID() == id {
			return g, nil
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		s.forget(s.groups, id)
	}
	groups, err := s.c.FindGroupsByAttribute(ctx, AttrSsodirID, id)
	if err != nil {
		return nil, err
	}
	switch len(groups) {
	case 0:
		return nil, fmt.Errorf("keycloak: group with ssodir_id %s: %w", id, ErrNotFound)
	case 1:
		s.remember(s.groups, id, groups[0].ID)
		return &groups[0], nil
	}
	return nil, fmt.Errorf("keycloak: %d groups carry ssodir_id %s: %w", len(groups), id, ErrConflict)
}

// UpsertUser creates the user in Keycloak, or brings the one that carries its ssodir_id
// up to date (username, email, names, enabled from Active, attributes). It sends nothing
// when Keycloak already matches, or already holds a newer version (its ssodir_version is
// above du.Version): an older state is never written over a newer one. du.Groups is ignored: memberships arrive as AddMember and
// RemoveMember events, and a user event that does not list them must not drop them.
//
// A username or email held by a user ssodir does not manage is an error matching
// ErrConflict; that user is not touched.
func (s *Syncer) UpsertUser(ctx context.Context, du DirectoryUser) error {
	return s.UpsertUserPassword(ctx, du, nil)
}

// DeleteUser removes the user's Keycloak account as the tenant's on_delete setting says:
// deletes it, or disables it, marking it with the delete's version. A user not in Keycloak
// is already gone. ssodirID names one incarnation of the user, which a delete ends for
// good, so no later state of it can be lost.
func (s *Syncer) DeleteUser(ctx context.Context, ssodirID string, version int64, onDelete OnDelete) error {
	mode, err := ParseOnDelete(string(onDelete))
	if err != nil {
		return err
	}
	defer s.c.cfg.Locks.lock(userLock(ssodirID))()
	cur, err := s.findUser(ctx, ssodirID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if mode == OnDeleteDisable {
		if !cur.Enabled || cur.SsodirVersion() >= version {
			return nil
		}
		cur.Enabled = false
		cur.Attributes = maps.Clone(cur.Attributes)
		if cur.Attributes == nil {
			cur.Attributes = map[string][]string{}
		}
		cur.Attributes[AttrSsodirVersion] = []string{strconv.FormatInt(version, 10)}
		err = s.c.UpdateUser(ctx, *cur)
		s.c.metrics.operation(string(ActionDisableUser), err)
		return err
	}
	err = ignoreNotFound(s.c.DeleteUser(ctx, cur.ID))
	s.c.metrics.operation(string(ActionDeleteUser), err)
	if err == nil {
		s.forget(s.users, ssodirID)
	}
	return err
}

// UpsertGroup creates the group in Keycloak, or brings the one that carries its ssodir_id
// up to date (name, description, attributes), unless Keycloak holds a newer version. A
// name held by a group ssodir does not manage is an error matching ErrConflict.
func (s *Syncer) UpsertGroup(ctx context.Context, dg DirectoryGroup) error {
	if err := checkID("group", dg.ID); err != nil {
		return err
	}
	defer s.c.cfg.Locks.lock(groupLock(dg.ID))()
	cur, err := s.findGroup(ctx, dg.ID)
	if errors.Is(err, ErrNotFound) {
		id, err := s.c.createManagedGroup(ctx, desiredGroup(dg, nil))
		s.c.metrics.operation(string(ActionCreateGroup), err)
		if err != nil {
			return err
		}
		s.remember(s.groups, dg.ID, id)
		return nil
	}
	if err != nil {
		return err
	}
	if cur.SsodirVersion() > dg.Version {
		return nil
	}
	want := desiredGroup(dg, cur)
	if len(diffGroup(*cur, want)) == 0 {
		return nil
	}
	err = s.c.UpdateGroup(ctx, want)
	s.c.metrics.operation(string(ActionUpdateGroup), err)
	if err != nil && cur.Name != want.Name && errors.Is(err, ErrConflict) {
		// A rename waits while another group of the realm holds the name (409), never a
		// second group nor a delete and create again (which would lose the Keycloak
		// group's id, role mappings and links): the record fails until the name is free.
		return fmt.Errorf("keycloak: rename group %s in place: another group of the realm holds the name: %w", dg.ID, err)
	}
	return err
}

// DeleteGroup deletes the group and, with it, its memberships. A group not in Keycloak is
// already gone.
func (s *Syncer) DeleteGroup(ctx context.Context, ssodirID string) error {
	defer s.c.cfg.Locks.lock(groupLock(ssodirID))()
	cur, err := s.findGroup(ctx, ssodirID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	err = ignoreNotFound(s.c.DeleteGroup(ctx, cur.ID))
	s.c.metrics.operation(string(ActionDeleteGroup), err)
	if err == nil {
		s.forget(s.groups, ssodirID)
	}
	return err
}

// AddMember puts the user in the group. It fails with ErrNotFound when either is not in
// Keycloak (yet): the caller retries the event later, or the next reconcile adds it.
func (s *Syncer) AddMember(ctx context.Context, userID, groupID string) error {
	err := s.membership(ctx, userID, groupID, true)
	s.c.metrics.operation(string(ActionJoin), err)
	return err
}

// RemoveMember takes the user out of the group. A user or group not in Keycloak has no
// membership to remove, which is success.
func (s *Syncer) RemoveMember(ctx context.Context, userID, groupID string) error {
	err := s.membership(ctx, userID, groupID, false)
	s.c.metrics.operation(string(ActionLeave), err)
	return err
}

func (s *Syncer) membership(ctx context.Context, userID, groupID string, join bool) error {
	for attempt := 0; ; attempt++ {
		uid, err := s.userID(ctx, userID)
		if err == nil {
			var gid string
			if gid, err = s.groupID(ctx, groupID); err == nil {
				if join {
					err = s.c.AddUserToGroup(ctx, uid, gid)
				} else {
					err = s.c.RemoveUserFromGroup(ctx, uid, gid)
				}
			}
		}
		if errors.Is(err, ErrNotFound) && attempt == 0 {
			// A cached id may be stale (the object was recreated): look both up again.
			s.forget(s.users, userID)
			s.forget(s.groups, groupID)
			continue
		}
		if !join {
			return ignoreNotFound(err)
		}
		return err
	}
}

// userID is the Keycloak id of the user, from the cache when there (checked by the caller's
// next request), else looked up by ssodir_id.
func (s *Syncer) userID(ctx context.Context, id string) (string, error) {
	if kcID, ok := s.cached(s.users, id); ok {
		return kcID, nil
	}
	u, err := s.findUser(ctx, id)
	if err != nil {
		return "", err
	}
	return u.ID, nil
}

func (s *Syncer) groupID(ctx context.Context, id string) (string, error) {
	if kcID, ok := s.cached(s.groups, id); ok {
		return kcID, nil
	}
	g, err := s.findGroup(ctx, id)
	if err != nil {
		return "", err
	}
	return g.ID, nil
}

// EraseUser deletes, whatever the tenant's on_delete, the Keycloak user of an erased
// person: the one carrying ssodirID, and a user ssodir manages (it carries an ssodir_id)
// under the erased username, which an earlier incarnation kept disabled may be — unless
// it carries keepID, the id of a new user who has taken the name since the erasure.
func (s *Syncer) EraseUser(ctx context.Context, ssodirID, username, keepID string) error {
	if ssodirID != "" {
		if err := s.DeleteUser(ctx, ssodirID, 0, OnDeleteDelete); err != nil {
			return err
		}
	}
	u, err := s.c.FindUserByUsername(ctx, username)
	if errors.Is(err, ErrNotFound) || (err == nil && (u == nil || u.SsodirID() == "" || u.SsodirID() == keepID)) {
		return nil
	}
	if err != nil {
		return err
	}
	defer s.c.cfg.Locks.lock(userLock(u.SsodirID()))()
	err = ignoreNotFound(s.c.DeleteUser(ctx, u.ID))
	s.c.metrics.operation(string(ActionDeleteUser), err)
	if err == nil {
		s.forget(s.users, u.SsodirID())
	}
	return err
}
