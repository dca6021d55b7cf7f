package commands

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/identity"
)

// KeycloakSettings are a tenant's Keycloak realm and client credentials.
type KeycloakSettings struct {
	URL          string
	Realm        string
	ClientID     string
	ClientSecret string
	OnDelete     string
}

// TenantRecord is a tenant as the write side stores it; the secret is encrypted.
type TenantRecord struct {
	System          string
	ID              string
	Status          string
	Keycloak        *KeycloakSettings
	CreatedAt       time.Time
	UpdatedAt       time.Time
	RowVersion      int64
	SecretEncrypted bool
}

// TenantStore keeps tenant rows and their tables.
type TenantStore interface {
	// GetTenant returns apperr not_found when there is none.
	GetTenant(ctx context.Context, system, tenant string) (TenantRecord, error)
	// PutTenant writes a row conditioned on the row version it was read at (0: absent);
	// it returns ErrVersionConflict when it lost a race.
	PutTenant(ctx context.Context, t TenantRecord, expectedRowVersion int64) error
	// CreateTables asks for the tenant's tables if missing, without waiting for them;
	// apperr table_quota_exceeded when the account's table quota is reached, an error
	// wrapping ErrTablesLater when DynamoDB refuses for now (its limit on concurrent table
	// operations): the tables are asked for again later.
	CreateTables(ctx context.Context, system, tenant string) error
	// EnsureTables creates the tenant's tables if missing and waits until they are ready,
	// asking again, paced, while DynamoDB answers ErrTablesLater (until ctx ends).
	EnsureTables(ctx context.Context, system, tenant string) error
	// DropTenant deletes the tables and the row of the incarnation of a tenant created at
	// createdAt that is still provisioning (or already dropping): it first moves the row to TenantDropping, conditionally, so that no
	// process finishes it any more; it returns ErrVersionConflict when the tenant became
	// active first.
	DropTenant(ctx context.Context, system, tenant string, createdAt time.Time) error
	// ProvisioningTenants lists the tenants still provisioning or dropping.
	ProvisioningTenants(ctx context.Context) ([]TenantRecord, error)
}

// SecretBox encrypts and decrypts secrets bound to a context string.
type SecretBox interface {
	Encrypter
	Decrypt(ctx context.Context, ciphertext string, aad string) ([]byte, error)
}

// ProvisionTenant provisions a tenant: its row and its tables.
type ProvisionTenant struct {
	System   string
	Tenant   string
	Keycloak *KeycloakSettings
}

// ProvisionTenantHandler decides ProvisionTenant.
type ProvisionTenantHandler struct {
	store   TenantStore
	secrets SecretBox
	now     Clock
}

func NewProvisionTenantHandler(s TenantStore, secrets SecretBox, now Clock) ProvisionTenantHandler {
	return ProvisionTenantHandler{store: s, secrets: secrets, now: now}
}

// Status values of a tenant.
const (
	TenantProvisioning = "provisioning"
	TenantActive       = "active"
	// TenantDropping is a provisioning being undone: it is never finished.
	TenantDropping = "dropping"
)

// ErrTablesLater is a table creation DynamoDB refused for now: the account is at its limit
// of concurrent table operations (250 creations of tables with secondary indexes at a
// time). It is not the table quota: the provisioning stays and is finished later.
var ErrTablesLater = errors.New("DynamoDB is at its limit of concurrent table operations; the tables are asked for again later")

// errDropping answers a provisioning of a tenant whose earlier provisioning is being
// undone: once it is gone, a retry provisions it afresh.
func errDropping() error {
	return apperr.Unavailable(errors.New("the tenant's provisioning is being undone; retry to provision it afresh"), 5*time.Second)
}

// Handle provisions the tenant and waits until its tables are ready: Start, then Finish.
// created is false when it already existed with the same settings (an interrupted
// provisioning is finished either way).
func (h ProvisionTenantHandler) Handle(ctx context.Context, cmd ProvisionTenant) (rec TenantRecord, created bool, err error) {
	rec, created, err = h.Start(ctx, cmd)
	if err != nil || rec.Status == TenantActive {
		return rec, created, err
	}
	rec, err = h.Finish(ctx, rec)
	return rec, created, err
}

// Start decides the provisioning and does its quick part: it writes the tenant row (status
// provisioning) and asks DynamoDB for the tables, without waiting for them. A tenant already
// there with the same settings is returned as it is (created false), its tables asked for
// again when it is still provisioning. When the account's table quota is reached, what was
// made is removed again and the error is apperr table_quota_exceeded: nothing is left
// half-made, and a retry starts afresh. When DynamoDB only refuses for now
// (ErrTablesLater: a burst of provisionings past its concurrent-creation limit), the tenant
// is returned provisioning, without error: Finish, or the background finisher, makes the
// tables later.
func (h ProvisionTenantHandler) Start(ctx context.Context, cmd ProvisionTenant) (rec TenantRecord, created bool, err error) {
	var p problems
	if !identity.ValidID(cmd.System) {
		p.Add("system", "must match ^[a-z0-9][a-z0-9-]{0,31}$")
	}
	if !identity.ValidID(cmd.Tenant) {
		p.Add("tenant_id", "must match ^[a-z0-9][a-z0-9-]{0,31}$")
	}
	if cmd.Keycloak != nil {
		checkKeycloak(&p, cmd.Keycloak)
	}
	if err := p.Err(invalidRequest); err != nil {
		return rec, false, err
	}
	existing, err := h.store.GetTenant(ctx, cmd.System, cmd.Tenant)
	switch {
	case err == nil:
		same, err := sameKeycloak(ctx, h.secrets, existing, cmd.Keycloak)
		if err != nil {
			return rec, false, err
		}
		if !same {
			return rec, false, apperr.Conflict(apperr.CodeTenantExists, "the tenant exists with other settings")
		}
		if existing.Status == TenantDropping {
			return rec, false, errDropping()
		}
		if existing.Status != TenantActive {
			if err := h.createTables(ctx, existing); err != nil {
				return rec, false, err
			}
		}
		return existing, false, nil
	case apperr.KindOf(err) != apperr.KindNotFound:
		return rec, false, err
	}
	now := h.now().UTC().Truncate(time.Millisecond)
	rec = TenantRecord{System: cmd.System, ID: cmd.Tenant, Status: TenantProvisioning, CreatedAt: now, UpdatedAt: now}
	if cmd.Keycloak != nil {
		if rec.Keycloak, err = sealKeycloak(ctx, h.secrets, rec, *cmd.Keycloak); err != nil {
			return rec, false, err
		}
	}
	if err := h.store.PutTenant(ctx, rec, 0); err != nil {
		if errors.Is(err, ErrVersionConflict) {
			// Provisioned concurrently: decide again against what is there now.
			return h.Start(ctx, cmd)
		}
		return rec, false, err
	}
	rec.RowVersion = 1
	if err := h.createTables(ctx, rec); err != nil {
		return rec, false, err
	}
	return rec, true, nil
}

// createTables asks for the tenant's tables, undoing the provisioning on a reached quota;
// a refusal for now (ErrTablesLater) is no error: the tenant stays provisioning.
func (h ProvisionTenantHandler) createTables(ctx context.Context, rec TenantRecord) error {
	err := h.store.CreateTables(ctx, rec.System, rec.ID)
	if errors.Is(err, ErrTablesLater) {
		return nil
	}
	return h.undoOnQuota(ctx, rec, err)
}

// undoOnQuota removes what a provisioning refused by the table quota made, and returns the
// quota error; any other err is returned as it is.
func (h ProvisionTenantHandler) undoOnQuota(ctx context.Context, rec TenantRecord, err error) error {
	if apperr.CodeOf(err) != apperr.CodeTableQuotaExceeded {
		return err
	}
	if derr := h.store.DropTenant(ctx, rec.System, rec.ID, rec.CreatedAt); derr != nil && !errors.Is(derr, ErrVersionConflict) {
		// The row stays provisioning: a retry, or the command API's resumption, tries again.
		return errors.Join(err, derr)
	}
	return err
}

// Finish waits until the tenant's tables are ready and marks it active; it is idempotent,
// so any process may finish a provisioning another one started. A reached table quota
// undoes the provisioning as Start does. A tenant being dropped is never finished: Finish
// completes the drop instead (deleting whatever tables it made meanwhile).
func (h ProvisionTenantHandler) Finish(ctx context.Context, rec TenantRecord) (TenantRecord, error) {
	if rec.Status == TenantDropping {
		return rec, h.drop(ctx, rec)
	}
	if err := h.store.EnsureTables(ctx, rec.System, rec.ID); err != nil {
		return rec, h.undoOnQuota(ctx, rec, err)
	}
	for attempt := 0; attempt < maxAttempts; attempt++ {
		switch rec.Status {
		case TenantActive:
			return rec, nil
		case TenantDropping:
			return rec, h.drop(ctx, rec)
		}
		rec.Status = TenantActive
		rec.UpdatedAt = h.now().UTC().Truncate(time.Millisecond)
		err := h.store.PutTenant(ctx, rec, rec.RowVersion)
		if err == nil {
			rec.RowVersion++
			return rec, nil
		}
		if !errors.Is(err, ErrVersionConflict) {
			return rec, err
		}
		// Changed meanwhile (finished or dropped by another process, or its Keycloak
		// settings replaced): read it again and finish what is there now.
		if rec, err = h.store.GetTenant(ctx, rec.System, rec.ID); err != nil {
			return rec, err
		}
	}
	return rec, apperr.Unavailable(ErrVersionConflict, time.Second)
}

// drop completes the drop of a tenant another process began to drop, and answers that the
// tenant is not provisioned.
func (h ProvisionTenantHandler) drop(ctx context.Context, rec TenantRecord) error {
	if err := h.store.DropTenant(ctx, rec.System, rec.ID, rec.CreatedAt); err != nil && !errors.Is(err, ErrVersionConflict) {
		return errors.Join(errDropping(), err)
	}
	return errDropping()
}

// UpdateKeycloak replaces a tenant's Keycloak settings.
type UpdateKeycloak struct {
	System   string
	Tenant   string
	Keycloak KeycloakSettings
}

// UpdateKeycloakHandler decides UpdateKeycloak.
type UpdateKeycloakHandler struct {
	store   TenantStore
	secrets SecretBox
	now     Clock
}

func NewUpdateKeycloakHandler(s TenantStore, secrets SecretBox, now Clock) UpdateKeycloakHandler {
	return UpdateKeycloakHandler{store: s, secrets: secrets, now: now}
}

func (h UpdateKeycloakHandler) Handle(ctx context.Context, cmd UpdateKeycloak) (TenantRecord, error) {
	var p problems
	checkKeycloak(&p, &cmd.Keycloak)
	if err := p.Err(invalidRequest); err != nil {
		return TenantRecord{}, err
	}
	for attempt := 0; attempt < maxAttempts; attempt++ {
		rec, err := h.store.GetTenant(ctx, cmd.System, cmd.Tenant)
		if err != nil {
			return rec, err
		}
		if rec.Keycloak, err = sealKeycloak(ctx, h.secrets, rec, cmd.Keycloak); err != nil {
			return rec, err
		}
		rec.UpdatedAt = h.now().UTC().Truncate(time.Millisecond)
		err = h.store.PutTenant(ctx, rec, rec.RowVersion)
		if errors.Is(err, ErrVersionConflict) {
			continue
		}
		if err != nil {
			return rec, err
		}
		rec.RowVersion++
		return rec, nil
	}
	return TenantRecord{}, apperr.Unavailable(ErrVersionConflict, time.Second)
}

func checkKeycloak(p *problems, k *KeycloakSettings) {
	k.URL = strings.TrimRight(strings.TrimSpace(k.URL), "/")
	u, err := url.Parse(k.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil || len(k.URL) > 2048 {
		p.Add("keycloak.url", "must be an absolute http(s) URL without query, fragment or credentials")
	}
	checkToken(p, "keycloak.realm", k.Realm)
	checkToken(p, "keycloak.client_id", k.ClientID)
	if k.ClientSecret == "" || len(k.ClientSecret) > 1024 {
		p.Add("keycloak.client_secret", "must be 1–1024 characters")
	}
	switch k.OnDelete {
	case "":
		k.OnDelete = "delete"
	case "delete", "disable":
	default:
		p.Add("keycloak.on_delete", "must be delete or disable")
	}
}

func checkToken(p *problems, field, v string) {
	if v == "" || len(v) > 255 || strings.ContainsAny(v, "/?#") {
		p.Add(field, "must be 1–255 characters without '/', '?' or '#'")
		return
	}
	checkText(p, field, v, 255, false)
}

func secretAAD(system, tenant string) string { return "client_secret:" + system + "/" + tenant }

// sealKeycloak is the settings with the secret encrypted for storage.
func sealKeycloak(ctx context.Context, box SecretBox, rec TenantRecord, k KeycloakSettings) (*KeycloakSettings, error) {
	ct, err := box.Encrypt(ctx, []byte(k.ClientSecret), secretAAD(rec.System, rec.ID))
	if err != nil {
		return nil, apperr.Internal(err)
	}
	k.ClientSecret = ct
	return &k, nil
}

// sameKeycloak compares stored settings (secret encrypted) with requested ones (in clear).
func sameKeycloak(ctx context.Context, box SecretBox, rec TenantRecord, want *KeycloakSettings) (bool, error) {
	have := rec.Keycloak
	if have == nil || want == nil {
		return have == nil && want == nil, nil
	}
	if have.URL != want.URL || have.Realm != want.Realm || have.ClientID != want.ClientID || have.OnDelete != want.OnDelete {
		return false, nil
	}
	secret, err := box.Decrypt(ctx, have.ClientSecret, secretAAD(rec.System, rec.ID))
	if err != nil {
		return false, apperr.Internal(err)
	}
	return string(secret) == want.ClientSecret, nil
}
