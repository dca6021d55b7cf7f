package httpapi_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
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

// serveLimited serves e on a fresh listener with l until the test ends.
func serveLimited(t *testing.T, e *echo.Echo, l httpapi.Limits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- httpapi.ServeWithLimits(ctx, e, ln, zap.NewNop(), l) }()
	t.Cleanup(func() { stop(); <-served })
	return ln.Addr().String()
}

func TestDefaultLimitsBoundEveryPhaseOfAConnection(t *testing.T) {
	l := httpapi.DefaultLimits
	// A zero in http.Server means "no limit".
	if l.ReadHeaderTimeout <= 0 || l.ReadTimeout <= 0 || l.WriteTimeout <= 0 || l.IdleTimeout <= 0 || l.MaxHeaderBytes <= 0 {
		t.Fatalf("DefaultLimits %+v leave a phase unbounded", l)
	}
	// An X-Min-Version read may wait 5 s; the write timeout must not cut it off.
	if l.WriteTimeout <= 5*time.Second {
		t.Errorf("WriteTimeout %v would cut off a 5 s X-Min-Version wait", l.WriteTimeout)
	}
}

func TestServeRefusesOversizedHeaders(t *testing.T) {
	e := httpapi.NewEcho(httpapi.Options{Log: zap.NewNop(), Service: "test"})
	e.GET("/ok", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- httpapi.Serve(ctx, e, ln, zap.NewNop()) }()
	t.Cleanup(func() { stop(); <-served })

	get := func(headerBytes int) int {
		req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/ok", nil)
		req.Header.Set("X-Padding", strings.Repeat("a", headerBytes))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := get(8 << 10); got != http.StatusOK {
		t.Errorf("8 KiB of headers (a large JWT): %d, want 200", got)
	}
	if got := get(256 << 10); got != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("256 KiB of headers: %d, want 431", got)
	}
}

// closedByServer reads from conn until the server closes it; it fails the test if the
// connection is still open after wait.
func closedByServer(t *testing.T, conn net.Conn, wait time.Duration) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %v", wait)
	}
}

func TestServeDropsSlowClients(t *testing.T) {
	limits := httpapi.Limits{
		ReadHeaderTimeout: 200 * time.Millisecond,
		ReadTimeout:       400 * time.Millisecond,
		WriteTimeout:      400 * time.Millisecond,
		IdleTimeout:       400 * time.Millisecond,
		MaxHeaderBytes:    8 << 10,
	}
	// The test waits far longer than any limit: a server without them never closes.
	const patience = 10 * time.Second

	t.Run("a client that sends its headers a byte at a time is cut off", func(t *testing.T) {
		e := httpapi.NewEcho(httpapi.Options{Log: zap.NewNop(), Service: "test"})
		addr := serveLimited(t, e, limits)
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n"); err != nil {
			t.Fatal(err)
		}
		stopDrip := make(chan struct{})
		defer close(stopDrip)
		go func() {
			for {
				select {
				case <-stopDrip:
					return
				case <-time.After(50 * time.Millisecond):
					if _, err := io.WriteString(conn, "X"); err != nil {
						return
					}
				}
			}
		}()
		closedByServer(t, conn, patience)
	})

	t.Run("a client that sends its body a byte at a time is cut off", func(t *testing.T) {
		bodyErr := make(chan error, 1)
		e := httpapi.NewEcho(httpapi.Options{Log: zap.NewNop(), Service: "test"})
		e.POST("/upload", func(c echo.Context) error {
			_, err := io.Copy(io.Discard, c.Request().Body)
			bodyErr <- err
			return err
		})
		addr := serveLimited(t, e, limits)
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 50000\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		go func() {
			for range 1000 {
				time.Sleep(20 * time.Millisecond)
				if _, err := io.WriteString(conn, "x"); err != nil {
					return
				}
			}
		}()
		select {
		case err := <-bodyErr:
			if err == nil {
				t.Fatal("the handler read the whole trickled body")
			}
		case <-time.After(patience):
			t.Fatal("the handler was still reading the trickled body")
		}
	})

	t.Run("a client that never reads the answer releases the handler", func(t *testing.T) {
		finished := make(chan error, 1)
		e := httpapi.NewEcho(httpapi.Options{Log: zap.NewNop(), Service: "test"})
		e.GET("/big", func(c echo.Context) error {
			w := c.Response()
			w.Header().Set(echo.HeaderContentType, "application/octet-stream")
			w.WriteHeader(http.StatusOK)
			chunk := make([]byte, 64<<10)
			var err error
			// Far more than the socket buffers hold: a writer blocks once they are full.
			for range 1024 {
				if _, err = w.Write(chunk); err != nil {
					break
				}
			}
			finished <- err
			return nil
		})
		addr := serveLimited(t, e, limits)
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-finished:
			if err == nil {
				t.Fatal("the handler wrote 64 MiB to a client that reads nothing")
			}
		case <-time.After(patience):
			t.Fatal("the handler is still blocked writing to a client that reads nothing")
		}
	})

	t.Run("an idle kept-alive connection is closed", func(t *testing.T) {
		e := httpapi.NewEcho(httpapi.Options{Log: zap.NewNop(), Service: "test"})
		e.GET("/ok", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
		addr := serveLimited(t, e, limits)
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("first request: %v %v", res, err)
		}
		res.Body.Close()
		closedByServer(t, conn, patience)
	})
}
