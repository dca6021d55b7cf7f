package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"
)

// ShutdownTimeout bounds how long Serve waits for in-flight requests after its context is
// done; it stays under the usual 30 s between SIGTERM and SIGKILL.
const ShutdownTimeout = 20 * time.Second

// Serve answers requests on ln until ctx is done, then stops accepting connections and lets
// in-flight requests finish. It returns nil after a clean shutdown.
func Serve(ctx context.Context, e *echo.Echo, ln net.Listener, log *zap.Logger) error {
	srv := &http.Server{
		Handler:           e,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("listening", zap.String("addr", ln.Addr().String()))

	select {
	case err := <-served:
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}

	log.Info("shutting down", zap.String("addr", ln.Addr().String()))
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		// Drop the connections that outlived the timeout rather than leave them behind.
		closeErr := srv.Close()
		return fmt.Errorf("shut down %s: %w", ln.Addr(), errors.Join(err, closeErr))
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	}
	return nil
}
