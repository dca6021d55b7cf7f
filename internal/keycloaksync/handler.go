package keycloaksync

import (
	"context"
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/keycloak"
	"github.com/ssodir/ssodir/internal/streams"
)

// Handler turns command-log stream records into Keycloak calls.
type Handler struct {
	realms   *Realms
	secrets  Decrypter
	registry *events.Registry
}

// NewHandler is the event-driven half of the sync.
func NewHandler(realms *Realms, secrets Decrypter, reg *events.Registry) *Handler {
	return &Handler{realms: realms, secrets: secrets, registry: reg}
}

// HandleMessage is the watermill handler.
func (h *Handler) HandleMessage(msg *message.Message) error {
	rec, err := streams.DecodeRecord(msg)
	if err != nil {
		return fmt.Errorf("decode stream record: %w", err)
	}
	return h.Apply(msg.Context(), rec)
}

// Apply syncs one stream record; only new history records carry events.
func (h *Handler) Apply(ctx context.Context, rec streams.Record) error {
	if rec.TTLDeletion || rec.EventName != streams.EventInsert || !dynamo.IsHistorySK(dynamo.StringAttr(rec.Keys, "sk")) {
		return nil
	}
	env, err := dynamo.DecodeRecord(h.registry, rec.NewImage)
	if err != nil {
		return fmt.Errorf("decode history record of %s: %w", rec.Aggregate, err)
	}
	realm, err := h.realms.Get(ctx, rec.System, rec.Tenant)
	if errors.Is(err, ErrNoKeycloak) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := h.sync(ctx, realm, env); err != nil {
		return fmt.Errorf("sync %s %s v%d to realm %s: %w", env.Type, env.Entity(), env.Version, realm.Tenant.KeycloakRealm, err)
	}
	return nil
}

func directoryUser(u events.User) keycloak.DirectoryUser {
	return keycloak.DirectoryUser{ID: u.ID, Username: u.Username, Email: u.Email, FirstName: u.FirstName,
		LastName: u.LastName, Active: u.IsActive, Attributes: u.Attributes}
}

func directoryGroup(g events.Group) keycloak.DirectoryGroup {
	return keycloak.DirectoryGroup{ID: g.ID, Name: g.Name, Description: g.Description, Attributes: g.Attributes}
}

func (h *Handler) sync(ctx context.Context, realm *Realm, env events.Envelope) error {
	s := realm.Syncer
	switch e := env.Payload.(type) {
	case *events.UserCreated:
		if err := s.UpsertUser(ctx, directoryUser(e.User)); err != nil {
			return err
		}
		return h.setPassword(ctx, realm, e.User, e.PasswordCiphertext)
	case *events.UserPasswordChanged:
		return h.setPassword(ctx, realm, e.User, e.PasswordCiphertext)
	case *events.UserUpdated:
		return s.UpsertUser(ctx, directoryUser(e.User))
	case *events.UserActivated:
		return s.UpsertUser(ctx, directoryUser(e.User))
	case *events.UserDeactivated:
		return s.UpsertUser(ctx, directoryUser(e.User))
	case *events.UserDeleted:
		return s.DeleteUser(ctx, e.PreviousID, realm.OnDelete)
	case *events.GroupCreated:
		return s.UpsertGroup(ctx, directoryGroup(e.Group))
	case *events.GroupUpdated:
		return s.UpsertGroup(ctx, directoryGroup(e.Group))
	case *events.GroupDeleted:
		return s.DeleteGroup(ctx, e.PreviousID)
	case *events.GroupMemberAdded:
		return s.AddMember(ctx, e.UserID, e.Group.ID)
	case *events.GroupMemberRemoved:
		return s.RemoveMember(ctx, e.UserID, e.Group.ID)
	}
	return fmt.Errorf("no Keycloak sync for event type %s", env.Type)
}

// setPassword sends a password once per change, decrypted only for the call.
func (h *Handler) setPassword(ctx context.Context, realm *Realm, u events.User, ciphertext string) error {
	if ciphertext == "" {
		return nil
	}
	plain, err := h.secrets.Decrypt(ctx, ciphertext, "password:"+realm.Tenant.SystemID+"/"+realm.Tenant.TenantID+"/"+u.Username)
	if err != nil {
		return fmt.Errorf("decrypt password of %s: %w", u.Username, err)
	}
	defer clear(plain)
	return realm.Syncer.SetPassword(ctx, u.ID, string(plain))
}
