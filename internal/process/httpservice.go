package process

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/httpapi"
)

// NewRegistry is a service's metrics registry, with the Go runtime's and the process's
// collectors already in it.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// HTTPService is an HTTP API service (the command and query APIs), beside Consumer: its
// echo instance, fully set up, served on one address.
type HTTPService struct {
	Addr string
	Log  *zap.Logger
	Echo *echo.Echo
	// OnListen learns the bound address (tests listen on port 0).
	OnListen func(addr string)
}

// Run serves until ctx is done and the server has drained; a stop asked for by ctx is
// not an error.
func (s HTTPService) Run(ctx context.Context) error {
	ln, err := listen(s.Addr, s.OnListen)
	if err != nil {
		return err
	}
	err = httpapi.Serve(ctx, s.Echo, ln, s.Log)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	s.Log.Info("stopped", zap.Error(err))
	return err
}

// listen binds addr and tells onListen, if set, the address it got.
func listen(addr string, onListen func(string)) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	if onListen != nil {
		onListen(ln.Addr().String())
	}
	return ln, nil
}
