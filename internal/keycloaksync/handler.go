package keycloaksync

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
	"github.com/ssodir/ssodir/internal/keycloak"
	"github.com/ssodir/ssodir/internal/streams"
)

// DefaultRecordTimeout bounds the sync of one record. A hung realm is noticed sooner, by
// the event path's request timeout (eventRequestTimeout), which parks the tenant and stops
// its other records in flight.
const DefaultRecordTimeout = 15 * time.Second

// HandlerConfig is what the event-driven sync needs.
type HandlerConfig struct {
	Realms   *Realms
	Secrets  Decrypter
	Registry *events.Registry
	// Store reads each tenant's write model.
	Store *dynamo.CommandStore
	// Health parks tenants whose realm fails.
	Health *Health
	// Park holds a message's stream until a time (streams.Park).
	Park func(msg *message.Message, until time.Time)
	// RecordTimeout bounds one record's sync (DefaultRecordTimeout).
	RecordTimeout time.Duration
	// Erasures is the erasure ledger, in which the sync marks its place (keycloak) done
	// once it deleted an erased user's Keycloak user; nil: erasures are synced as deletes
	// and never marked.
	Erasures *erasure.Ledger
}

// Handler turns command-log stream records into Keycloak calls.
//
// Records are only triggers: for each, the handler reads the aggregate's state from the
// write model as it is now (strongly consistent) and writes that, with its version, so a
// record delivered late, twice, or out of order (a lease handover, a re-drive) never
// writes an older state than the one Keycloak holds (keycloak.Syncer also compares
// ssodir_version), never re-creates a user or group deleted since, and never re-adds a
// membership removed since. A password is sent only while it is still the user's current
// one, so an older password never replaces a newer.
type Handler struct {
	cfg    HandlerConfig
	probes probes
}

// NewHandler is the event-driven half of the sync.
func NewHandler(cfg HandlerConfig) *Handler {
	if cfg.RecordTimeout <= 0 {
		cfg.RecordTimeout = DefaultRecordTimeout
	}
	return &Handler{cfg: cfg}
}

// errParked is the nack of a record held behind its tenant's first failure.
var errParked = errors.New("tenant parked: its Keycloak realm is failing")

// writeModelError marks a failure to read the write model: the realm was not at fault.
type writeModelError struct{ err error }

func (e writeModelError) Error() string { return "read the write model: " + e.err.Error() }
func (e writeModelError) Unwrap() error { return e.err }

// errParkExpired is the nack of a record given up because its tenant has been parked
// longer than ParkMax: it becomes a dead letter, re-driven once the realm answers.
var errParkExpired = errors.New("tenant parked longer than SSO_KEYCLOAK_PARK_MAX: kept as a dead letter until its Keycloak realm answers")

// probeTimeout bounds a probe of a realm (as one event-path request).
const probeTimeout = eventRequestTimeout

// slowRecord is how long a record may take before it gives back its delivery slot: a
// Keycloak answer to one user or group operation takes milliseconds.
const slowRecord = time.Second

// HandleMessage is the watermill handler. A record of a parked tenant is held (Park)
// without going near the realm, unless the tenant's probe is due: then the realm itself is
// probed first, and the record goes to it only once it answers. A failure that looks like
// the realm's (5xx, 429, a timeout) parks the tenant only when a probe of the realm fails
// too; when the realm answers its probe, the failure is this record's, which is retried and
// dead-lettered like any failing record while the tenant's other records go on. A tenant
// parked longer than ParkMax has its records made dead letters (streams.GiveUp).
func (h *Handler) HandleMessage(msg *message.Message) error {
	rec, err := streams.DecodeRecord(msg)
	if err != nil {
		return fmt.Errorf("decode stream record: %w", err)
	}
	if !carriesEvent(rec) {
		return nil
	}
	// A record still not done after slowRecord gives back its delivery slot
	// (streams.ReleaseSlot): a realm that hangs is noticed only after a request timeout
	// and a probe, and until then its tenant's records in flight would hold slots that
	// every tenant shares. They stay in flight for their own stream (MaxInFlightPerShard).
	mctx := msg.Context()
	slow := time.AfterFunc(slowRecord, func() { streams.ReleaseSlot(mctx) })
	defer slow.Stop()
	health := h.cfg.Health
	until, admission := health.admit(rec.System, rec.Tenant)
	switch admission {
	case admitHold:
		h.cfg.Park(msg, until)
		return errParked
	case admitGiveUp:
		health.gaveUp()
		streams.GiveUp(msg)
		return errParkExpired
	case admitProbe:
		if perr := h.probe(msg.Context(), rec); perr != nil {
			return h.parkOrGiveUp(msg, rec, perr)
		}
		health.OK(msg.Context(), rec.System, rec.Tenant)
	}
	watched, stop := health.Watch(msg.Context(), rec.System, rec.Tenant)
	defer stop()
	ctx, cancel := context.WithTimeout(watched, h.cfg.RecordTimeout)
	defer cancel()
	err = h.Apply(ctx, rec)
	if errors.Is(context.Cause(watched), errParked) {
		// Another record found the realm failing while this one waited on it.
		until, _ := health.Until(rec.System, rec.Tenant)
		h.cfg.Park(msg, until)
		return errParked
	}
	if h.realmFailed(msg.Context(), err) {
		// A 429 is the realm throttling this client, whatever the record: it parks the
		// tenant for the Retry-After asked (a park is bounded by ParkMax).
		if keycloak.StatusCode(err) == http.StatusTooManyRequests {
			return h.parkOrGiveUp(msg, rec, err)
		}
		// The realm's fault, or this record's? Ask the realm itself — one record of the
		// tenant at a time: the others that failed meanwhile wait for its verdict.
		perr := h.probeAfterFailure(msg.Context(), rec.System, rec.Tenant, func() error { return h.probe(msg.Context(), rec) })
		if errors.Is(perr, errParked) {
			until, _ := health.Until(rec.System, rec.Tenant)
			h.cfg.Park(msg, until)
			return errParked
		}
		var failed probeFailed
		if errors.As(perr, &failed) {
			return h.holdOrGiveUp(msg, rec, failed.err)
		}
		health.OK(ctx, rec.System, rec.Tenant)
		return fmt.Errorf("the realm answers, but not for this record: %w", err)
	}
	if err == nil {
		health.OK(ctx, rec.System, rec.Tenant)
	}
	return err
}

// parkOrGiveUp parks the record's tenant after its realm failed a probe with err, or gives
// the record up when the tenant has been parked longer than ParkMax.
func (h *Handler) parkOrGiveUp(msg *message.Message, rec streams.Record, err error) error {
	h.cfg.Health.Failed(msg.Context(), rec.System, rec.Tenant, err, keycloak.RetryAfterOf(err))
	return h.holdOrGiveUp(msg, rec, err)
}

// holdOrGiveUp holds the record of a tenant parked after err until its park's end, or
// gives the record up when the tenant has been parked longer than ParkMax.
func (h *Handler) holdOrGiveUp(msg *message.Message, rec streams.Record, err error) error {
	if _, a := h.cfg.Health.admit(rec.System, rec.Tenant); a == admitGiveUp {
		h.cfg.Health.gaveUp()
		streams.GiveUp(msg)
		return fmt.Errorf("%w: %w", errParkExpired, err)
	}
	until, _ := h.cfg.Health.Until(rec.System, rec.Tenant)
	h.cfg.Park(msg, until)
	return err
}

// probe asks the record's realm itself whether it answers (keycloak.Client.Probe); nil
// when it does, or when the failure is not the realm's (no Keycloak settings, the tenant
// row unreadable).
func (h *Handler) probe(parent context.Context, rec streams.Record) error {
	ctx, cancel := context.WithTimeout(parent, probeTimeout)
	defer cancel()
	realm, err := h.cfg.Realms.Get(ctx, rec.System, rec.Tenant)
	if err != nil {
		return nil
	}
	if err := realm.Client.Probe(ctx); err != nil && parent.Err() == nil && keycloak.RealmUnavailable(err) {
		return err
	}
	return nil
}

// realmFailed tells a failure that may be the realm's from a failure of this record (a
// 4xx, a membership whose user is not there yet) or of the write model.
func (h *Handler) realmFailed(parent context.Context, err error) bool {
	var wm writeModelError
	if err == nil || parent.Err() != nil || errors.As(err, &wm) || errors.Is(err, ErrNoKeycloak) {
		return false
	}
	return keycloak.RealmUnavailable(err)
}

// carriesEvent reports whether a record is a new history record, the only kind that
// carries an event.
func carriesEvent(rec streams.Record) bool {
	return !rec.TTLDeletion && rec.EventName == streams.EventInsert && dynamo.IsHistorySK(dynamo.StringAttr(rec.Keys, "sk"))
}

// Apply syncs one stream record.
func (h *Handler) Apply(ctx context.Context, rec streams.Record) error {
	if !carriesEvent(rec) {
		return nil
	}
	env, err := dynamo.DecodeRecord(h.cfg.Registry, rec.NewImage)
	if err != nil {
		return fmt.Errorf("decode history record of %s: %w", identity.LogKey(rec.Aggregate), err)
	}
	if err := h.cfg.Store.JoinRecordParts(ctx, commands.Tenant{System: rec.System, ID: rec.Tenant}, rec.NewImage, &env); err != nil {
		return writeModelError{err}
	}
	realm, err := h.cfg.Realms.Get(ctx, rec.System, rec.Tenant)
	if errors.Is(err, ErrNoKeycloak) {
		if e, ok := env.Payload.(*events.UserErased); ok {
			return h.erased(ctx, rec, e) // no realm holds the person
		}
		return nil
	}
	if err != nil {
		return err
	}
	if e, ok := env.Payload.(*events.UserErased); ok {
		// A new user may have taken the name once the erasure freed it: theirs stays.
		cur, _, live, err := NewWriteModel(h.cfg.Store, rec.System, rec.Tenant).user(ctx, e.User.Username)
		if err != nil {
			return writeModelError{err}
		}
		keep := ""
		if live {
			keep = cur.ID
		}
		if err := realm.Syncer.EraseUser(ctx, e.PreviousID, e.User.Username, keep); err != nil {
			return fmt.Errorf("erase a user in realm %s: %w", realm.Tenant.KeycloakRealm, err)
		}
		return h.erased(ctx, rec, e)
	}
	wm := NewWriteModel(h.cfg.Store, rec.System, rec.Tenant)
	if err := h.sync(ctx, realm, wm, env); err != nil {
		return fmt.Errorf("sync %s %s v%d to realm %s: %w", env.Type, identity.LogKey(env.Entity()), env.Version, realm.Tenant.KeycloakRealm, err)
	}
	return nil
}

func directoryUser(u events.User) keycloak.DirectoryUser {
	return keycloak.DirectoryUser{ID: u.ID, Username: u.Username, Email: u.Email, FirstName: u.FirstName,
		LastName: u.LastName, Active: u.IsActive, Attributes: u.Attributes, Version: u.Version}
}

func directoryGroup(g events.Group) keycloak.DirectoryGroup {
	return keycloak.DirectoryGroup{ID: g.ID, Name: g.Name, Description: g.Description, Attributes: g.Attributes, Version: g.Version}
}

func (h *Handler) sync(ctx context.Context, realm *Realm, wm *WriteModel, env events.Envelope) error {
	s := realm.Syncer
	switch e := env.Payload.(type) {
	case *events.UserDeleted:
		// A delete ends one incarnation for good: no later state of it can be lost.
		return s.DeleteUser(ctx, e.PreviousID, e.User.Version, realm.OnDelete)
	case *events.GroupDeleted:
		return s.DeleteGroup(ctx, e.PreviousID)
	case *events.GroupMemberAdded:
		if member, err := h.isMember(ctx, wm, e.Group, e.Username, e.UserID); err != nil || !member {
			return err // removed since: the removal's own record syncs that
		}
		return s.AddMember(ctx, e.UserID, e.Group.ID)
	case *events.GroupMemberRemoved:
		if member, err := h.isMember(ctx, wm, e.Group, e.Username, e.UserID); err != nil || member {
			return err // added again since
		}
		return s.RemoveMember(ctx, e.UserID, e.Group.ID)
	case *events.GroupMembersChanged:
		return h.syncMembers(ctx, realm, wm, e)
	case *events.UserRenamed:
		return h.syncRename(ctx, realm, wm, e)
	case *events.GroupRenamed:
		return h.syncGroupRename(ctx, realm, wm, e)
	case *events.UserCreated:
		return h.syncUser(ctx, realm, wm, e.User, e.PasswordCiphertext)
	case *events.UserPasswordChanged:
		return h.syncUser(ctx, realm, wm, e.User, e.PasswordCiphertext)
	}
	if u, ok := events.UserState(env.Payload); ok {
		return h.syncUser(ctx, realm, wm, u, "")
	}
	if g, ok := events.GroupState(env.Payload); ok {
		return h.syncGroup(ctx, realm, wm, g)
	}
	return fmt.Errorf("no Keycloak sync for event type %s", env.Type)
}

func (h *Handler) isMember(ctx context.Context, wm *WriteModel, g events.Group, username, userID string) (bool, error) {
	gid, uid, ok, err := wm.Member(ctx, g.Name, username)
	if err != nil {
		return false, writeModelError{err}
	}
	return ok && gid == g.ID && uid == userID, nil
}

// memberConcurrency bounds the Keycloak calls of one group.members_changed in flight (the
// realm's client bounds its own requests too).
const memberConcurrency = 8

// syncMembers is the sync of group.member_added and group.member_removed for every member
// of a members change, with one read of the write model for all of them: an addition is
// sent while the user is still a member of that incarnation of the group, a removal while
// it is not one again. The record succeeds only when every call did; a redelivery sends
// them again, which changes nothing in Keycloak.
func (h *Handler) syncMembers(ctx context.Context, realm *Realm, wm *WriteModel, e *events.GroupMembersChanged) error {
	names := make([]string, 0, len(e.Added)+len(e.Removed))
	for _, m := range slices.Concat(e.Added, e.Removed) {
		names = append(names, m.Username)
	}
	current, err := wm.Members(ctx, e.Group.Name, names)
	if err != nil {
		return writeModelError{err}
	}
	member := func(m events.Member) bool {
		c, ok := current[m.Username]
		return ok && c.GroupID == e.Group.ID && c.UserID == m.UserID
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(memberConcurrency)
	for _, m := range e.Added {
		if member(m) {
			g.Go(func() error { return realm.Syncer.AddMember(gctx, m.UserID, e.Group.ID) })
		}
	}
	for _, m := range e.Removed {
		if !member(m) {
			g.Go(func() error { return realm.Syncer.RemoveMember(gctx, m.UserID, e.Group.ID) })
		}
	}
	return g.Wait()
}

// syncRename renames the Keycloak user in place (UpsertUser finds it by its ssodir_id),
// then joins it to the groups the rename moved that it is still in under the new name: a
// membership record of the old name that comes after the rename finds no membership of
// that name, and would not send it.
func (h *Handler) syncRename(ctx context.Context, realm *Realm, wm *WriteModel, e *events.UserRenamed) error {
	if err := h.syncUser(ctx, realm, wm, e.User, ""); err != nil {
		return err
	}
	for _, m := range e.Memberships {
		gid, uid, ok, err := wm.Member(ctx, m.GroupKey, e.User.Username)
		if err != nil {
			return writeModelError{err}
		}
		if ok && uid == e.User.ID {
			if err := realm.Syncer.AddMember(ctx, uid, gid); err != nil {
				return err
			}
		}
	}
	return nil
}

// syncUser writes the user's current state, if the event's incarnation is still the live
// one, and the event's password if it is still the current one. The password goes once
// per change: Keycloak keeps the version of the change it holds (ssodir_password_version),
// and a record at or below it sends nothing (keycloak.Syncer.UpsertUserPassword).
func (h *Handler) syncUser(ctx context.Context, realm *Realm, wm *WriteModel, u events.User, ciphertext string) error {
	cur, password, ok, err := wm.user(ctx, u.Username)
	if err != nil {
		return writeModelError{err}
	}
	if !ok || cur.ID != u.ID {
		return nil // deleted, or deleted and created again, since: those records sync it
	}
	var pw *keycloak.PasswordChange
	if ciphertext != "" && ciphertext == password {
		// u is the state the change made: its version is the change's.
		pw = &keycloak.PasswordChange{Version: u.Version, Open: func(ctx context.Context) ([]byte, error) {
			plain, err := h.cfg.Secrets.Decrypt(ctx, ciphertext, "password:"+realm.Tenant.SystemID+"/"+realm.Tenant.TenantID+"/"+cur.Username)
			if err != nil {
				return nil, fmt.Errorf("decrypt password of user %s: %w", cur.ID, err)
			}
			return plain, nil
		}}
	}
	return realm.Syncer.UpsertUserPassword(ctx, directoryUser(cur), pw)
}

func (h *Handler) syncGroup(ctx context.Context, realm *Realm, wm *WriteModel, g events.Group) error {
	cur, ok, err := wm.group(ctx, g.Name)
	if err != nil {
		return writeModelError{err}
	}
	if !ok || cur.ID != g.ID {
		return nil
	}
	return realm.Syncer.UpsertGroup(ctx, directoryGroup(cur))
}

// erased marks the erasure's Keycloak place done.
func (h *Handler) erased(ctx context.Context, rec streams.Record, e *events.UserErased) error {
	if h.cfg.Erasures == nil {
		return nil
	}
	return h.cfg.Erasures.MarkDone(ctx, rec.System, rec.Tenant, e.ErasureID, commands.PlaceKeycloak)
}
