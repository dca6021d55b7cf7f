package httpapi

import (
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the request metrics of one service, labelled by route template so that
// their number stays bounded whatever paths clients send.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers the request metrics on reg. It panics if they are registered
// already, as prometheus.MustRegister does: that is a wiring bug found at start.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	labels := []string{"service", "route", "method", "status"}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "http_requests_total",
			Help: "HTTP requests answered, by route template and status.",
		}, labels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route template and status.",
			Buckets: prometheus.DefBuckets,
		}, labels),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

func (m *Metrics) observe(service, route, method string, status int, latency time.Duration) {
	code := strconv.Itoa(status)
	m.requests.WithLabelValues(service, route, method, code).Inc()
	m.duration.WithLabelValues(service, route, method, code).Observe(latency.Seconds())
}

// MetricsHandler serves reg in the Prometheus text format.
func MetricsHandler(reg *prometheus.Registry) echo.HandlerFunc {
	return echo.WrapHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
}
