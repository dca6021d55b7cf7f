package commandapi

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/httpapi"
	"github.com/ssodir/ssodir/internal/identity"
	"github.com/ssodir/ssodir/internal/objects"
)

type keycloakBody struct {
	URL          string `json:"url"`
	Realm        string `json:"realm"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	OnDelete     string `json:"on_delete"`
}

func (k *keycloakBody) settings() *commands.KeycloakSettings {
	if k == nil {
		return nil
	}
	return &commands.KeycloakSettings{URL: k.URL, Realm: k.Realm, ClientID: k.ClientID, ClientSecret: k.ClientSecret, OnDelete: k.OnDelete}
}

type provisionBody struct {
	TenantID string        `json:"tenant_id"`
	Keycloak *keycloakBody `json:"keycloak"`
}

// postTenant provisions a tenant; it is idempotent by nature (200 when it is there with the
// same settings), so an Idempotency-Key adds nothing and is checked but not recorded. The
// request waits for the tables up to the provision wait: 201 when they are ready by then,
// else 202 with the tenant provisioning, finished in the background.
func (a *api) postTenant(c echo.Context) error {
	if _, _, err := idempotencyKey(c); err != nil {
		return err
	}
	var b provisionBody
	if err := httpapi.DecodeJSON(c, &b); err != nil {
		return err
	}
	system := c.Param("system")
	if !identity.ValidID(system) {
		return apperr.NotFound("system")
	}
	if !httpapi.PrincipalFrom(c).AllowsTenant(system, b.TenantID) {
		return apperr.Forbidden("the token does not grant access to this tenant")
	}
	rec, status, err := a.provision.provision(c.Request().Context(), commands.ProvisionTenant{System: system, Tenant: b.TenantID, Keycloak: b.Keycloak.settings()})
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		c.Response().Header().Set(echo.HeaderLocation, "/v1/systems/"+system+"/tenants/"+rec.ID)
	}
	setTenantHeaders(c, rec)
	return c.JSON(status, toTenantJSON(rec))
}

// provisioner runs tenant provisionings: the quick part in the request, the wait for the
// tables in the background, bounded by the process's context. It also finishes, at start
// and periodically, the provisionings a stopped process left (any command API instance
// may: finishing is idempotent), and it remembers which tenants are active, so that a
// command on a tenant still provisioning is answered 409 tenant_not_ready at the cost of
// one read per tenant and process.
type provisioner struct {
	h       commands.ProvisionTenantHandler
	tenants commands.TenantStore
	ctx     context.Context
	wait    time.Duration
	log     *zap.Logger

	mu sync.Mutex
	// running are the background provisionings, by tenant; each channel closes when its
	// provisioning ends, after err is set.
	running map[string]*finishing
	// gate remembers the tenants seen active.
	gate *commands.TenantGate
	// slots bound the background provisionings that run side by side: a burst of
	// onboarding queues here rather than polling DynamoDB all at once.
	slots chan struct{}
}

// backgroundConcurrency is how many tenants one process finishes side by side: with 3
// tables each, below DynamoDB's 250 concurrent creations of tables with indexes (a process
// past it is only told to ask again later).
const backgroundConcurrency = 64

type finishing struct {
	done chan struct{}
	rec  commands.TenantRecord
	err  error
}

const (
	defaultProvisionWait   = 5 * time.Second
	defaultProvisionResume = 30 * time.Second
)

// backgroundLimit bounds one background provisioning; the resumption retries after it.
const backgroundLimit = 10 * time.Minute

func newProvisioner(d Deps) *provisioner {
	p := &provisioner{
		h: commands.NewProvisionTenantHandler(d.Tenants, d.Secrets, d.Clock), tenants: d.Tenants,
		ctx: d.Context, wait: d.ProvisionWait, log: d.Log, running: map[string]*finishing{}, gate: d.TenantGate,
		slots: make(chan struct{}, backgroundConcurrency),
	}
	if p.gate == nil {
		p.gate = commands.NewTenantGate(d.Tenants)
	}
	if p.log == nil {
		p.log = zap.NewNop()
	}
	if p.wait <= 0 {
		p.wait = defaultProvisionWait
	}
	if p.ctx == nil {
		p.ctx = context.Background()
		return p
	}
	every := d.ProvisionResume
	switch {
	case every < 0:
		// Lambda mode: a frozen function runs no loop; the scheduled task
		// resume-provisioning does this.
		return p
	case every == 0:
		every = defaultProvisionResume
	}
	go p.resumeEvery(every)
	return p
}

func tenantKey(system, tenant string) string { return system + "/" + tenant }

// provision starts the provisioning and waits for it up to the provision wait; status is
// 200 (there already, active), 201 (tables ready now) or 202 (still provisioning).
func (p *provisioner) provision(ctx context.Context, cmd commands.ProvisionTenant) (commands.TenantRecord, int, error) {
	rec, _, err := p.h.Start(ctx, cmd)
	if err != nil {
		return rec, 0, err
	}
	if rec.Status == commands.TenantActive {
		p.gate.MarkActive(commands.Tenant{System: rec.System, ID: rec.ID})
		return rec, http.StatusOK, nil
	}
	f := p.finish(rec)
	timer := time.NewTimer(p.wait)
	defer timer.Stop()
	select {
	case <-f.done:
		if f.err != nil {
			return rec, 0, f.err
		}
		return f.rec, http.StatusCreated, nil
	case <-timer.C:
		return rec, http.StatusAccepted, nil
	case <-ctx.Done():
		return rec, http.StatusAccepted, nil
	}
}

// finish runs Finish in the background unless it already runs for this tenant.
func (p *provisioner) finish(rec commands.TenantRecord) *finishing {
	key := tenantKey(rec.System, rec.ID)
	p.mu.Lock()
	defer p.mu.Unlock()
	if f, ok := p.running[key]; ok {
		return f
	}
	f := &finishing{done: make(chan struct{})}
	p.running[key] = f
	go func() {
		select {
		case p.slots <- struct{}{}:
			defer func() { <-p.slots }()
			ctx, cancel := context.WithTimeout(p.ctx, backgroundLimit)
			defer cancel()
			f.rec, f.err = p.h.Finish(ctx, rec)
		case <-p.ctx.Done():
			f.rec, f.err = rec, p.ctx.Err()
		}
		switch {
		case f.err == nil:
			p.gate.MarkActive(commands.Tenant{System: rec.System, ID: rec.ID})
			p.log.Info("tenant provisioned", zap.String("system", rec.System), zap.String("tenant", rec.ID))
		case p.ctx.Err() == nil:
			p.log.Warn("tenant provisioning did not finish; it is resumed later",
				zap.String("system", rec.System), zap.String("tenant", rec.ID), zap.Error(f.err))
		}
		p.mu.Lock()
		delete(p.running, key)
		p.mu.Unlock()
		close(f.done)
	}()
	return f
}

// resumeEvery finishes the tenants left provisioning, at start and every interval.
func (p *provisioner) resumeEvery(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		p.resume()
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *provisioner) resume() {
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	if c, ok := p.tenants.(interface {
		CountTables(context.Context) (int, error)
	}); ok {
		if n, err := c.CountTables(ctx); err != nil {
			if p.ctx.Err() == nil {
				p.log.Warn("could not count the stage's tables", zap.Error(err))
			}
		} else {
			p.log.Info(commands.StageTablesMessage, zap.Int("tables", n))
		}
	}
	recs, err := p.tenants.ProvisioningTenants(ctx)
	if err != nil {
		if p.ctx.Err() == nil {
			p.log.Warn("could not look for tenants left provisioning", zap.Error(err))
		}
		return
	}
	for _, rec := range recs {
		p.finish(rec)
	}
}

// ready answers a command on a tenant still provisioning with 409 tenant_not_ready.
func (p *provisioner) ready(ctx context.Context, t commands.Tenant) error {
	return p.gate.Ready(ctx, t)
}

func (a *api) putKeycloak(c echo.Context) error {
	system, tenant := c.Param("system"), c.Param("tenant")
	if !identity.ValidID(system) || !identity.ValidID(tenant) {
		return apperr.NotFound("tenant")
	}
	if _, _, err := idempotencyKey(c); err != nil {
		return err
	}
	var b keycloakBody
	if err := httpapi.DecodeJSON(c, &b); err != nil {
		return err
	}
	settings := *b.settings()
	rec, err := a.updateKeycloak.Handle(c.Request().Context(), commands.UpdateKeycloak{System: system, Tenant: tenant, Keycloak: settings})
	if err != nil {
		return err
	}
	setTenantHeaders(c, rec)
	out := toTenantJSON(rec)
	if a.realmCheck != nil && out.Keycloak != nil {
		// Whether the realm will take a rename: with "Edit username" off (Keycloak's
		// default) every rename waits as a dead letter until an administrator turns it on.
		ctx, cancel := context.WithTimeout(c.Request().Context(), realmCheckTimeout)
		out.Keycloak.UsernameChanges = a.realmCheck(ctx, settings)
		cancel()
	}
	return c.JSON(http.StatusOK, out)
}

// realmCheckTimeout bounds PUT /keycloak's read of the realm's settings; a realm that
// does not answer in time leaves username_changes unknown.
const realmCheckTimeout = 5 * time.Second

func toTenantJSON(rec commands.TenantRecord) objects.Tenant {
	out := objects.Tenant{SystemID: rec.System, TenantID: rec.ID, Status: rec.Status,
		CreatedAt: objects.Timestamp(rec.CreatedAt), UpdatedAt: objects.Timestamp(rec.UpdatedAt)}
	if k := rec.Keycloak; k != nil {
		out.Keycloak = &objects.Keycloak{URL: k.URL, Realm: k.Realm, ClientID: k.ClientID, OnDelete: k.OnDelete}
	}
	return out
}

// setTenantHeaders adds what every successful write answers with: the row's version and
// an id for the command.
func setTenantHeaders(c echo.Context, rec commands.TenantRecord) {
	h := c.Response().Header()
	h.Set("ETag", strconv.Quote(strconv.FormatInt(rec.RowVersion, 10)))
	h.Set("X-Command-Id", uuid.NewString())
}
