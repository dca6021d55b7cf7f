package process

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/httpapi"
	"github.com/ssodir/ssodir/internal/streams"
)

// Consumer is a stream-consuming service: a watermill router that feeds a streams
// Subscriber's records to one handler, beside an HTTP server with the probes and metrics.
type Consumer struct {
	Service    string
	Addr       string
	Log        *zap.Logger
	Registry   *prometheus.Registry
	Subscriber *streams.Subscriber
	Handle     message.NoPublishHandlerFunc
	// Ready adds a check of the process's dependencies to /readyz.
	Ready func(ctx context.Context) error
	// OnListen learns the bound address (tests listen on port 0).
	OnListen func(addr string)
	// Background loops run beside the router until the service stops.
	Background []func(ctx context.Context)
	// CORSOrigins may read the probes and metrics from a browser (the web console).
	CORSOrigins []string
	// Routes adds routes of the service's own beside the probes (the projector's progress
	// feed).
	Routes func(e *echo.Echo)
	// NoCORSPaths are routes never offered to browsers (the progress feed).
	NoCORSPaths []string
}

// routerCloseTimeout stays above the subscriber's own shutdown timeout, so that the
// subscriber, not the router, decides when in-flight records are given up.
const routerCloseTimeout = 20 * time.Second

// Run serves until ctx is done, then drains: the router stops taking records, in-flight
// ones finish, the subscriber writes its final checkpoints and releases its leases.
func (c Consumer) Run(ctx context.Context) error {
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: routerCloseTimeout}, WatermillLogger(c.Log))
	if err != nil {
		return fmt.Errorf("router: %w", err)
	}
	router.AddMiddleware(streams.FailureReason)
	router.AddConsumerHandler(c.Service, "ssodir.user_commands", c.Subscriber, c.Handle)

	e := httpapi.NewEcho(httpapi.Options{Log: c.Log, Metrics: httpapi.NewMetrics(c.Registry), Service: c.Service, CORSOrigins: c.CORSOrigins, NoCORSPaths: c.NoCORSPaths})
	httpapi.RegisterProbes(e, func(ctx context.Context) error {
		if c.Ready != nil {
			if err := c.Ready(ctx); err != nil {
				return err
			}
		}
		return c.Subscriber.Ready()
	}, c.Registry)
	if c.Routes != nil {
		c.Routes(e)
	}
	ln, err := listen(c.Addr, c.OnListen)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- httpapi.Serve(ctx, e, ln, c.Log) }()
	var wg sync.WaitGroup
	for _, loop := range c.Background {
		wg.Add(1)
		go func() { defer wg.Done(); loop(ctx) }()
	}

	routerErr := router.Run(ctx)
	cancel()
	closeErr := router.Close()
	wg.Wait()
	serveErr := <-served
	if errors.Is(routerErr, context.Canceled) {
		routerErr = nil
	}
	return errors.Join(routerErr, closeErr, serveErr)
}
