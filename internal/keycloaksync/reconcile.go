package keycloaksync

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/keycloak"
)

// DefaultReconcileConcurrency is how many tenants are reconciled at once.
const DefaultReconcileConcurrency = 4

// ReconcilerConfig is what full reconciles need.
type ReconcilerConfig struct {
	Realms  *Realms
	Tenants *dynamo.Tenants
	// DB reads the read model (the directory side of the plan); Store the write model
	// every action is re-checked against before it is applied.
	DB    QueryDB
	Store *dynamo.CommandStore
	// Statuses records each reconcile's outcome (nil: not recorded); Health says which
	// tenants are parked (their reconciles wait until the realm answers again).
	Statuses *dynamo.SyncStatuses
	Health   *Health
	// MaxDeleteShare is the safety valve.
	MaxDeleteShare float64
	// Concurrency bounds the reconciles in flight (DefaultReconcileConcurrency).
	Concurrency int
	// Owner names this process in the reconcile claims that let one of several
	// keycloak-sync processes reconcile a tenant each round.
	Owner      string
	Registerer prometheus.Registerer
	Log        *zap.Logger
}

// Reconciler compares each tenant's realm with its directory and repairs the drift.
type Reconciler struct {
	cfg   ReconcilerConfig
	valve keycloak.SafetyValve

	lastSuccess *prometheus.GaugeVec
	lastDrift   *prometheus.GaugeVec
	drift       *prometheus.CounterVec
	repaired    *prometheus.CounterVec
}

// NewReconciler registers its metrics on cfg.Registerer.
func NewReconciler(cfg ReconcilerConfig) (*Reconciler, error) {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultReconcileConcurrency
	}
	r := &Reconciler{cfg: cfg,
		valve: keycloak.SafetyValve{MaxShare: cfg.MaxDeleteShare, Floor: keycloak.DefaultSafetyValve.Floor},
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ssodir_keycloak_last_reconcile_success_timestamp_seconds",
			Help: "When the last full reconcile of a tenant succeeded."}, []string{"system", "tenant"}),
		lastDrift: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ssodir_keycloak_last_reconcile_drift",
			Help: "What the last full reconcile of a tenant found: differences found, repaired, and dropped as stale (the directory had moved on)."},
			[]string{"system", "tenant", "outcome"}),
		drift: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ssodir_keycloak_reconcile_drift_total",
			Help: "Differences found by full reconciles, by action."}, []string{"action"}),
		repaired: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ssodir_keycloak_reconcile_repaired_total",
			Help: "Differences full reconciles repaired (applied), or dropped as stale because the directory had moved on."}, []string{"outcome"}),
	}
	for _, c := range []prometheus.Collector{r.lastSuccess, r.lastDrift, r.drift, r.repaired} {
		if err := cfg.Registerer.Register(c); err != nil {
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

// Tenant reconciles one tenant's realm: it reads the realm, then the directory (the
// tenant's read model), plans the difference, and applies it, each action re-checked
// against the write model as it is when the action runs.
func (r *Reconciler) Tenant(ctx context.Context, row dynamo.Tenant, opts Options) (*keycloak.Plan, error) {
	realm, err := r.cfg.Realms.For(ctx, row)
	if err != nil {
		return nil, err
	}
	valve := r.valve
	plan, err := keycloak.NewPlan(ctx, NewDirectory(r.cfg.DB, row.UsersTable), realm.Client,
		keycloak.PlanOptions{OnDelete: realm.OnDelete, Valve: &valve})
	if plan != nil && opts.Out != nil && (opts.DryRun || !plan.Empty()) {
		fmt.Fprintf(opts.Out, "%s/%s (realm %s):\n", row.SystemID, row.TenantID, row.KeycloakRealm)
		if _, werr := plan.WriteTo(opts.Out); werr != nil {
			return plan, werr
		}
	}
	if opts.DryRun {
		return plan, err
	}
	// Whether the realm lets a rename through, for the tenant's status: a realm that
	// refuses holds every rename as a dead letter until "Edit username" is turned on.
	// (Not asked of a realm whose reads just failed: it would only wait again.)
	var changes keycloak.UsernameChanges
	if err == nil {
		var uerr error
		if changes, uerr = realm.Client.UsernameChanges(ctx); uerr != nil {
			r.cfg.Log.Info("could not read the realm's settings", zap.String("tenant", row.SystemID+"/"+row.TenantID), zap.Error(uerr))
		}
	}
	var res keycloak.ApplyResult
	if err == nil {
		for _, a := range plan.Actions {
			r.drift.WithLabelValues(string(a.Kind)).Inc()
		}
		res, err = keycloak.Apply(ctx, plan, realm.Client, keycloak.ApplyOptions{
			Check: NewWriteModel(r.cfg.Store, row.SystemID, row.TenantID), Progress: opts.Progress})
		r.repaired.WithLabelValues("applied").Add(float64(res.Applied))
		r.repaired.WithLabelValues("stale").Add(float64(res.Stale))
	}
	if plan != nil {
		r.lastDrift.WithLabelValues(row.SystemID, row.TenantID, "found").Set(float64(len(plan.Actions)))
		r.lastDrift.WithLabelValues(row.SystemID, row.TenantID, "repaired").Set(float64(res.Applied))
		r.lastDrift.WithLabelValues(row.SystemID, row.TenantID, "stale").Set(float64(res.Stale))
	}
	if err == nil {
		r.lastSuccess.WithLabelValues(row.SystemID, row.TenantID).SetToCurrentTime()
	}
	r.record(ctx, row, plan, res, err, changes)
	return plan, err
}

func (r *Reconciler) record(ctx context.Context, row dynamo.Tenant, plan *keycloak.Plan, res keycloak.ApplyResult, err error, changes keycloak.UsernameChanges) {
	if r.cfg.Statuses == nil {
		return
	}
	o := dynamo.ReconcileOutcome{At: time.Now(), Err: err, DriftRepaired: res.Applied, Stale: res.Stale, UsernameChanges: string(changes)}
	if plan != nil {
		o.DriftFound, o.Conflicts = len(plan.Actions), len(plan.Conflicts)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if werr := r.cfg.Statuses.RecordReconcile(ctx, row.SystemID, row.TenantID, o); werr != nil {
		r.cfg.Log.Warn("record reconcile status", zap.String("tenant", row.SystemID+"/"+row.TenantID), zap.Error(werr))
	}
}

// Tenants are the active tenants with Keycloak settings, narrowed to system (and tenant).
func (r *Reconciler) Tenants(ctx context.Context, system, tenant string) ([]dynamo.Tenant, error) {
	rows, err := r.cfg.Tenants.List(ctx)
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

// offset is where in each interval a tenant's reconcile starts: spread evenly by a hash of
// its name, and the same every round, so that a thousand tenants never start together and
// each is reconciled once an interval.
func offset(key string, interval time.Duration) time.Duration {
	if interval <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return time.Duration(h.Sum64() % uint64(interval))
}

// Loop reconciles every tenant once an interval until ctx is done. Each round reads the
// tenant list once, starts each tenant's reconcile at its own offset in the interval, runs
// at most Concurrency at once, each with the interval as its deadline, and skips a tenant
// whose previous reconcile still runs, whose realm is failing (parked), or that another
// keycloak-sync process claimed this round.
func (r *Reconciler) Loop(ctx context.Context, interval time.Duration) {
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, r.cfg.Concurrency)
	var mu sync.Mutex
	running := map[string]bool{}
	for {
		start := time.Now()
		rows, err := r.Tenants(ctx, "", "")
		if err != nil && ctx.Err() == nil {
			r.cfg.Log.Warn("list tenants for reconcile", zap.Error(err))
		}
		sort.Slice(rows, func(i, j int) bool {
			return offset(rows[i].SystemID+"/"+rows[i].TenantID, interval) < offset(rows[j].SystemID+"/"+rows[j].TenantID, interval)
		})
		for _, row := range rows {
			key := row.SystemID + "/" + row.TenantID
			if !sleepUntil(ctx, start.Add(offset(key, interval))) {
				return
			}
			if _, parked := r.cfg.Health.Parked(row.SystemID, row.TenantID); parked {
				continue
			}
			if !r.claim(ctx, row, interval) {
				continue
			}
			mu.Lock()
			busy := running[key]
			running[key] = true
			mu.Unlock()
			if busy {
				continue
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					<-sem
					mu.Lock()
					delete(running, key)
					mu.Unlock()
				}()
				tctx, cancel := context.WithTimeout(ctx, interval)
				defer cancel()
				if _, err := r.Tenant(tctx, row, Options{}); err != nil && ctx.Err() == nil && !errors.Is(err, ErrNoKeycloak) {
					r.cfg.Log.Error("reconcile failed", zap.String("tenant", key), zap.Error(err))
				}
			}()
		}
		if !sleepUntil(ctx, start.Add(interval)) {
			return
		}
	}
}

// claim reports whether this process reconciles the tenant this round: with several
// keycloak-sync processes, the first to claim it does, and the claim lasts a little less
// than the interval so that next round's claim is open again.
func (r *Reconciler) claim(ctx context.Context, row dynamo.Tenant, interval time.Duration) bool {
	if r.cfg.Statuses == nil {
		return true
	}
	now := time.Now()
	ok, err := r.cfg.Statuses.ClaimReconcile(ctx, row.SystemID, row.TenantID, r.cfg.Owner, now, now.Add(interval*9/10))
	if err != nil {
		// Better a reconcile twice than none.
		r.cfg.Log.Warn("claim a reconcile", zap.String("tenant", row.SystemID+"/"+row.TenantID), zap.Error(err))
		return true
	}
	return ok
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
