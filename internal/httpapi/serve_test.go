package httpapi_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/httpapi"
)

func TestServeDrainsInFlightRequests(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	e := httpapi.NewEcho(httpapi.Options{Log: zap.NewNop(), Service: "test"})
	e.GET("/slow", func(c echo.Context) error {
		close(started)
		<-release
		return c.String(http.StatusOK, "done")
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, stop := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- httpapi.Serve(ctx, e, ln, zap.NewNop()) }()

	type result struct {
		body string
		err  error
	}
	answered := make(chan result, 1)
	go func() {
		res, err := http.Get("http://" + addr + "/slow")
		if err != nil {
			answered <- result{err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		answered <- result{body: string(b), err: err}
	}()
	<-started
	stop()

	// Shutdown closes the listener first; wait for that, so the request is surely in flight
	// during the shutdown and not merely before it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("the listener still accepts connections after the context is done")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned %v with a request in flight", err)
	default:
	}

	close(release)
	if r := <-answered; r.err != nil || r.body != "done" {
		t.Errorf("in-flight request: body %q, error %v; want it completed", r.body, r.err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve after a clean shutdown: %v", err)
	}
}
