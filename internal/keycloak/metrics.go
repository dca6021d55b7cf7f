package keycloak

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Keycloak sync's Prometheus series. One Metrics serves every tenant's
// client (ClientConfig.Metrics); a nil *Metrics records nothing.
type Metrics struct {
	operations *prometheus.CounterVec
	drift      *prometheus.CounterVec
	retries    *prometheus.CounterVec
}

// Outcomes of an operation, the outcome label of ssodir_keycloak_operations_total.
const (
	OutcomeOK       = "ok"
	OutcomeConflict = "conflict"
	OutcomeNotFound = "not_found"
	OutcomeError    = "error"
)

// NewMetrics creates the series and registers them on reg:
//
//	ssodir_keycloak_operations_total{kind,outcome}  writes to Keycloak, by action kind
//	                                                (create_user, join, set_password …)
//	ssodir_keycloak_drift_total{kind}               differences a full reconcile found, by
//	                                                action kind, plus kind="conflict"
//	ssodir_keycloak_retries_total{reason}           request retries, by status code,
//	                                                "timeout", "connection", "token" or "401"
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ssodir_keycloak_operations_total",
			Help: "Writes to Keycloak by kind and outcome.",
		}, []string{"kind", "outcome"}),
		drift: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ssodir_keycloak_drift_total",
			Help: "Differences between the directory and Keycloak found by full reconciles, by action kind.",
		}, []string{"kind"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ssodir_keycloak_retries_total",
			Help: "Keycloak requests retried, by reason.",
		}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{m.operations, m.drift, m.retries} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register keycloak metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) operation(kind string, err error) {
	if m == nil {
		return
	}
	m.operations.WithLabelValues(kind, outcomeOf(err)).Inc()
}

func outcomeOf(err error) string {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, ErrConflict):
		return OutcomeConflict
	case errors.Is(err, ErrNotFound):
		return OutcomeNotFound
	default:
		return OutcomeError
	}
}

// planned counts what a reconcile plan found.
func (m *Metrics) planned(p *Plan) {
	if m == nil {
		return
	}
	for _, a := range p.Actions {
		m.drift.WithLabelValues(string(a.Kind)).Inc()
	}
	if n := len(p.Conflicts); n > 0 {
		m.drift.WithLabelValues("conflict").Add(float64(n))
	}
}

func (m *Metrics) retried(reason string) {
	if m == nil {
		return
	}
	m.retries.WithLabelValues(reason).Inc()
}
