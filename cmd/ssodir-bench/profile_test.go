package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"

	"github.com/ssodir/ssodir/internal/auth"
	"github.com/ssodir/ssodir/internal/commandapi"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/httpapi"
	"github.com/ssodir/ssodir/internal/process"
	"github.com/ssodir/ssodir/internal/queries"
	"github.com/ssodir/ssodir/internal/scimtoken"
	"github.com/ssodir/ssodir/internal/secrets"
)

// The benchmarks below run a service's request path in-process — wired as its cmd/ does,
// logging at info to io.Discard — against a fresh DynamoDB Local, so that a CPU profile
// shows where the service's own time goes (the binaries serve no pprof):
//
//	go test -run '^$' -bench CommandAPICreate -benchtime 20s -cpuprofile cpu.out ./cmd/ssodir-bench
//	go tool pprof -top cpu.out
//
// They are not part of `make bench`, whose figures come from the real processes.

// profileEnv is an in-process service over a fresh DynamoDB Local with the bench tenant.
type profileEnv struct {
	env *env
	srv *httptest.Server
	b   *bench
}

func newProfileEnv(tb testing.TB, register func(e *echo.Echo, env *env, authn *auth.Authenticator)) *profileEnv {
	tb.Helper()
	ctx := context.Background()
	l, err := dynamotest.Start(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(l.Stop)
	names := dynamo.Names{Prefix: "prof"}
	b := &bench{http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	e := &env{b: b, local: l, prefix: names.Prefix, names: names, db: l.DynamoDB(), streams: l.Streams()}
	if err := dynamo.EnsureSharedTables(ctx, e.db, names, dynamo.TableSettings{}); err != nil {
		tb.Fatal(err)
	}
	log, err := process.NewLoggerTo("profile", zapcore.InfoLevel, io.Discard)
	if err != nil {
		tb.Fatal(err)
	}
	authn, err := auth.New(ctx, auth.Config{BootstrapToken: benchToken}, http.DefaultClient, log)
	if err != nil {
		tb.Fatal(err)
	}
	echoSrv := httpapi.NewEcho(httpapi.Options{Log: log, Metrics: httpapi.NewMetrics(prometheus.NewRegistry()), Service: "profile"})
	register(echoSrv, e, authn)
	// Tenants are provisioned through a command API, as the bench does.
	cmdAPI := httpapi.NewEcho(httpapi.Options{Log: log, Service: "profile-provision"})
	registerCommandAPI(tb, cmdAPI, e, authn)
	provisioner := httptest.NewServer(cmdAPI)
	defer provisioner.Close()
	p := &profileEnv{env: e, srv: httptest.NewServer(echoSrv), b: b}
	tb.Cleanup(p.srv.Close)
	if err := e.provision(ctx, &service{addr: provisioner.Listener.Addr().String()}); err != nil {
		tb.Fatal(err)
	}
	return p
}

func registerCommandAPI(tb testing.TB, e *echo.Echo, env *env, authn *auth.Authenticator) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	box, err := secrets.NewLocal(key)
	if err != nil {
		tb.Fatal(err)
	}
	fingerprints, err := commands.NewFingerprinter(key)
	if err != nil {
		tb.Fatal(err)
	}
	hasher, err := scimtoken.NewHasher(key)
	if err != nil {
		tb.Fatal(err)
	}
	commandapi.Register(e, commandapi.Deps{Auth: authn, Store: dynamo.NewCommandStore(env.db, env.names, events.NewRegistry(), 0),
		Tenants: dynamo.NewTenantStore(env.db, env.names), Secrets: box, Clock: time.Now, Fingerprints: fingerprints,
		ScimTokens: dynamo.NewScimTokenStore(env.db, env.names), ScimTokenHasher: hasher})
}

// BenchmarkCommandAPICreate is POST /users at concurrency 8 (the bench's c=8).
func BenchmarkCommandAPICreate(b *testing.B) {
	p := newProfileEnv(b, func(e *echo.Echo, env *env, authn *auth.Authenticator) {
		registerCommandAPI(b, e, env, authn)
	})
	url := p.srv.URL + tenantPath() + "/users"
	var seq atomic.Int64
	b.SetParallelism(4) // 4 × GOMAXPROCS (2) = 8 clients
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			u := benchUser("prof", int(seq.Add(1)), time.Now().UTC())
			if _, _, err := p.b.expect(context.Background(), http.StatusCreated, "POST", url, createBody(u)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// newQueryProfileEnv is an in-process query API over the small scale's read model.
func newQueryProfileEnv(b *testing.B) (*profileEnv, []events.User) {
	p := newProfileEnv(b, func(e *echo.Echo, env *env, authn *auth.Authenticator) {
		svc, err := queries.New(env.db, env.names, make([]byte, 32), queries.Options{})
		if err != nil {
			b.Fatal(err)
		}
		queries.NewHandlers(svc).Register(e, httpapi.RequireScope(authn, auth.ScopeRead))
	})
	users, err := seedReadModel(context.Background(), p.env, scales["small"].ReadUsers, scales["small"].ReadGroups)
	if err != nil {
		b.Fatal(err)
	}
	return p, users
}

// BenchmarkQueryAPIGetUser is GET /users/{u} at concurrency 8 over the small read model.
func BenchmarkQueryAPIGetUser(b *testing.B) {
	p, users := newQueryProfileEnv(b)
	base := p.srv.URL + tenantPath() + "/users/"
	var seq atomic.Int64
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			u := users[int(seq.Add(1))%len(users)]
			if _, _, err := p.b.expect(context.Background(), http.StatusOK, "GET", base+u.Username, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkQueryAPIWalk is the read scenario's 3-page walk of GET /users at concurrency 8.
func BenchmarkQueryAPIWalk(b *testing.B) {
	p, _ := newQueryProfileEnv(b)
	base := p.srv.URL + tenantPath()
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			path := fmt.Sprintf("/users?limit=%d", walkLimit)
			for range 3 {
				_, body, err := p.b.expect(context.Background(), http.StatusOK, "GET", base+path, nil)
				if err != nil {
					b.Error(err)
					return
				}
				var page struct {
					NextCursor *string `json:"next_cursor"`
				}
				if err := json.Unmarshal(body, &page); err != nil || page.NextCursor == nil {
					b.Errorf("no next page after %s (%v)", path, err)
					return
				}
				path = fmt.Sprintf("/users?limit=%d&cursor=%s", walkLimit, url.QueryEscape(*page.NextCursor))
			}
		}
	})
}
