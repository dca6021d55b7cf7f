// Package servicetest runs ssodir's real service binaries (command-api, query-api,
// projector) as processes against the test package's DynamoDB Local, for tests of the
// Go client and of ssodirctl: real HTTP servers, real storage, real streams.
//
// Use Main from TestMain (it builds the binaries, through internal/testbin, and starts DynamoDB Local), then
// Start in each test for an installation of its own (its own table prefix).
package servicetest

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/testbin"
)

// Token is the bootstrap token the services accept (all scopes, all tenants).
const Token = "servicetest-token"

var (
	binDir string
	local  *dynamotest.Local
)

// Main builds the services, starts DynamoDB Local, runs the tests and cleans up.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, cleanup, err := testbin.Build(nil, "./cmd/command-api", "./cmd/query-api", "./cmd/projector")
	if err != nil {
		fmt.Fprintln(os.Stderr, "servicetest: build the services:", err)
		return 1
	}
	defer cleanup()
	binDir = dir
	l, err := dynamotest.Start(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "servicetest:", err)
		return 1
	}
	defer l.Stop()
	local = l
	return m.Run()
}

// Services is one installation: the three services on free ports, sharing a table prefix.
type Services struct {
	// CommandURL and QueryURL are the APIs' base URLs.
	CommandURL string
	QueryURL   string
	// Prefix is the installation's table prefix.
	Prefix string
	procs  []*proc
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	out  bytes.Buffer
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// cursorKey is the query API's SSO_CURSOR_KEY (its own key, not SSO_SECRET_KEY).
const cursorKey = "ZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXp7fH1+f4CBgoM="

// Start runs the command API, the query API and the projector for the test, stopped
// (SIGTERM, checked to exit 0) when it ends.
func Start(t *testing.T) *Services {
	t.Helper()
	if local == nil {
		t.Fatal("servicetest: Main did not run (call servicetest.Main from TestMain)")
	}
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i*13 + 5)
	}
	s := &Services{Prefix: dynamotest.UniqueName("svct")}
	env := append(local.Env(), "SSO_TABLE_PREFIX="+s.Prefix,
		"SSO_SECRET_KEY="+base64.StdEncoding.EncodeToString(key), "SSO_CURSOR_KEY="+cursorKey, "SSO_BOOTSTRAP_TOKEN="+Token,
		"SSO_LOG_LEVEL=warn", "SSO_STREAM_POLL=20ms", "SSO_WEBHOOKS_ALLOW_PRIVATE=true",
		// An erasure's second pass comes this long after its first: the least allowed, not
		// the default 30 s that a test waiting for an erasure would sit through.
		"SSO_ERASURE_SETTLE=10s", "SSO_PROGRESS_TOKEN=servicetest-progress", "PATH="+os.Getenv("PATH"), "HOME="+os.Getenv("HOME"))
	s.CommandURL = "http://" + s.start(t, "command-api", env, "SSO_COMMAND_ADDR")
	s.start(t, "projector", env, "SSO_PROJECTOR_ADDR")
	// X-Min-Version reads wait on the projector's progress feed, found in its heartbeat row.
	s.QueryURL = "http://" + s.start(t, "query-api", env, "SSO_QUERY_ADDR")
	return s
}

func (s *Services) start(t *testing.T, name string, env []string, addrVar string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := &proc{name: name, cmd: exec.Command(filepath.Join(binDir, name)), done: make(chan struct{})}
	p.cmd.Env = append(env, addrVar+"="+addr)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.stop(t) })
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			t.Fatalf("%s exited during start:\n%s", name, p.output())
		default:
		}
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				s.procs = append(s.procs, p)
				return addr
			}
		}
		time.Sleep(30 * time.Millisecond)
	}
	t.Fatalf("%s not ready within 60s:\n%s", name, p.output())
	return ""
}

func (p *proc) stop(t *testing.T) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(40 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("%s did not stop within 40s of SIGTERM", p.name)
		return
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("%s exited %d after SIGTERM:\n%s", p.name, code, p.output())
	}
}

// Stop stops one of the installation's services (command-api, query-api or projector)
// now, as the test's end would (SIGTERM, checked to exit 0): a test of what goes on
// without it.
func (s *Services) Stop(t *testing.T, name string) {
	t.Helper()
	for _, p := range s.procs {
		if p.name == name {
			p.stop(t)
			return
		}
	}
	t.Fatalf("servicetest: no %s in this installation", name)
}
