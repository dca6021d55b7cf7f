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

// Limits bound what one connection can hold: a client that sends its headers or body
// slowly (slowloris), never reads the answer, or idles between requests loses the
// connection, and the goroutine serving it, once its timeout passes.
type Limits struct {
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included.
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the end of its answer;
	// it must exceed the longest handler (an X-Min-Version read waits up to 5 s).
	WriteTimeout time.Duration
	// IdleTimeout bounds a kept-alive connection's wait for its next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers (net/http adds 4 KiB of slack);
	// larger requests are answered 431.
	MaxHeaderBytes int
}

// DefaultLimits are every ssodir listener's limits. 32 KiB of headers leaves room for a
// large JWT (Keycloak tokens with many roles reach a few KiB).
var DefaultLimits = Limits{
	ReadHeaderTimeout: 10 * time.Second,
	ReadTimeout:       30 * time.Second,
	WriteTimeout:      30 * time.Second,
	IdleTimeout:       2 * time.Minute,
	MaxHeaderBytes:    32 << 10,
}

// Serve answers requests on ln with DefaultLimits until ctx is done, then stops accepting
// connections and lets in-flight requests finish. It returns nil after a clean shutdown.
func Serve(ctx context.Context, e *echo.Echo, ln net.Listener, log *zap.Logger) error {
	return ServeWithLimits(ctx, e, ln, log, DefaultLimits)
}

// ServeWithLimits is Serve with other limits (tests use short ones).
func ServeWithLimits(ctx context.Context, e *echo.Echo, ln net.Listener, log *zap.Logger, l Limits) error {
	srv := &http.Server{
		Handler:           e,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
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
