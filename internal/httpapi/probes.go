package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ssodir/ssodir/internal/apperr"
)

const (
	pathHealthz = "/healthz"
	pathReadyz  = "/readyz"
	pathMetrics = "/metrics"

	// readyTimeout keeps a hanging dependency from hanging the probe past the prober's own
	// timeout, which would read as a failure without a reason.
	readyTimeout = 2 * time.Second
)

// RegisterProbes adds the open operational routes: /healthz (the process is up), /readyz
// (ready reports whether its dependencies answer; nil means always ready) and /metrics.
func RegisterProbes(e *echo.Echo, ready func(ctx context.Context) error, reg *prometheus.Registry) {
	ok := func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	}
	e.GET(pathHealthz, ok)
	e.GET(pathReadyz, func(c echo.Context) error {
		if ready != nil {
			ctx, cancel := context.WithTimeout(c.Request().Context(), readyTimeout)
			defer cancel()
			if err := ready(ctx); err != nil {
				return apperr.Unavailable(err, time.Second)
			}
		}
		return ok(c)
	})
	e.GET(pathMetrics, MetricsHandler(reg))
}
