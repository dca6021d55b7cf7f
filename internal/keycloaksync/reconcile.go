package keycloaksync

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/keycloak"
)

// Reconciler compares each tenant's realm with its directory and repairs the drift.
type Reconciler struct {
	realms  *Realms
	tenants *dynamo.Tenants
	db      QueryDB
	valve   keycloak.SafetyValve
	log     *zap.Logger

	lastSuccess *prometheus.GaugeVec
	drift       *prometheus.CounterVec
}

// NewReconciler registers its metrics on reg; maxDeleteShare is the safety valve.
func NewReconciler(realms *Realms, tenants *dynamo.Tenants, db QueryDB, maxDeleteShare float64, reg prometheus.Registerer, log *zap.Logger) (*Reconciler, error) {
	r := &Reconciler{realms: realms, tenants: tenants, db: db, log: log,
		valve: keycloak.SafetyValve{MaxShare: maxDeleteShare, Floor: keycloak.DefaultSafetyValve.Floor},
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ssodir_keycloak_last_reconcile_success_timestamp_seconds",
			Help: "When the last full reconcile of a tenant succeeded."}, []string{"system", "tenant"}),
		drift: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ssodir_keycloak_reconcile_drift_total",
			Help: "Differences found by full reconciles, by action."}, []string{"action"}),
	}
	for _, c := range []prometheus.Collector{r.lastSuccess, r.drift} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register reconcile metrics: %w", err)
		}
	}
	return r, nil
}

// Options of one reconcile.
type Options struct {
	DryRun bool
	// Out receives the plan as a readable diff (always on a dry run).
	Out io.Writer
	// Progress is told how far Apply is.
	Progress func(done, total int)
}

// Tenant reconciles one tenant's realm.
func (r *Reconciler) Tenant(ctx context.Context, row dynamo.Tenant, opts Options) (*keycloak.Plan, error) {
	realm, err := r.realms.For(ctx, row)
	if err != nil {
		return nil, err
	}
	valve := r.valve
	plan, err := keycloak.NewPlan(ctx, NewDirectory(r.db, row.UsersTable), realm.Client,
		keycloak.PlanOptions{OnDelete: realm.OnDelete, Valve: &valve})
	if plan != nil && opts.Out != nil && (opts.DryRun || !plan.Empty()) {
		fmt.Fprintf(opts.Out, "%s/%s (realm %s):\n", row.SystemID, row.TenantID, row.KeycloakRealm)
		if _, werr := plan.WriteTo(opts.Out); werr != nil {
			return plan, werr
		}
	}
	if err != nil {
		return plan, err
	}
	for _, a := range plan.Actions {
		r.drift.WithLabelValues(string(a.Kind)).Inc()
	}
	if opts.DryRun {
		return plan, nil
	}
	if _, err := keycloak.Apply(ctx, plan, realm.Client, opts.Progress); err != nil {
		return plan, err
	}
	r.lastSuccess.WithLabelValues(row.SystemID, row.TenantID).SetToCurrentTime()
	return plan, nil
}

// Tenants are the tenants with Keycloak settings, narrowed to system (and tenant).
func (r *Reconciler) Tenants(ctx context.Context, system, tenant string) ([]dynamo.Tenant, error) {
	rows, err := r.tenants.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []dynamo.Tenant
	for _, row := range rows {
		if row.KeycloakURL == "" || row.Status != dynamo.TenantActive ||
			(system != "" && row.SystemID != system) || (tenant != "" && row.TenantID != tenant) {
			continue
		}
		out = append(out, row)
	}
	return out, nil
}

// Loop reconciles every tenant every interval until ctx is done. Each tenant has its own
// loop and deadline, so one slow or failing realm never holds up another; tenants
// provisioned later are picked up at the next interval.
func (r *Reconciler) Loop(ctx context.Context, interval time.Duration) {
	var wg sync.WaitGroup
	defer wg.Wait()
	running := map[string]bool{}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		rows, err := r.Tenants(ctx, "", "")
		if err != nil && ctx.Err() == nil {
			r.log.Warn("list tenants for reconcile", zap.Error(err))
		}
		for _, row := range rows {
			key := row.SystemID + "/" + row.TenantID
			if running[key] {
				continue
			}
			running[key] = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.tenantLoop(ctx, row.SystemID, row.TenantID, interval)
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *Reconciler) tenantLoop(ctx context.Context, system, tenant string, interval time.Duration) {
	key := system + "/" + tenant
	for {
		tctx, cancel := context.WithTimeout(ctx, interval)
		rows, err := r.Tenants(tctx, system, tenant)
		if err == nil && len(rows) == 1 {
			_, err = r.Tenant(tctx, rows[0], Options{})
		}
		cancel()
		if err != nil && ctx.Err() == nil {
			r.log.Error("reconcile failed", zap.String("tenant", key), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}
