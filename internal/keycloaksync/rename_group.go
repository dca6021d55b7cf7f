package keycloaksync

import (
	"context"

	"github.com/ssodir/ssodir/internal/events"
)

// syncGroupRename renames the Keycloak group in place (UpsertGroup finds it by its
// ssodir_id and PUTs it with the new name: same Keycloak id, memberships and role
// mappings kept), then joins it to the members the rename moved that are still in it
// under the new name: a membership record of the old name that comes after the rename
// finds no membership of that name, and would not send it.
func (h *Handler) syncGroupRename(ctx context.Context, realm *Realm, wm *WriteModel, e *events.GroupRenamed) error {
	if err := h.syncGroup(ctx, realm, wm, e.Group); err != nil {
		return err
	}
	if len(e.Members) == 0 {
		return nil
	}
	names := make([]string, 0, len(e.Members))
	for _, m := range e.Members {
		if !m.Erased {
			names = append(names, m.Username)
		}
	}
	current, err := wm.Members(ctx, e.Group.Name, names)
	if err != nil {
		return writeModelError{err}
	}
	for _, m := range e.Members {
		if m.Erased {
			continue
		}
		c, ok := current[m.Username]
		if ok && c.GroupID == e.Group.ID && c.UserID == m.UserID {
			if err := realm.Syncer.AddMember(ctx, m.UserID, e.Group.ID); err != nil {
				return err
			}
		}
	}
	return nil
}
