// Package console tests the web console in a real browser: Debian's headless Chromium,
// driven from Go with chromedp, against ssodir's real binaries on DynamoDB Local.
package console

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/testbin"
	"github.com/ssodir/ssodir/test/apitest"
)

const token = "console-test-token"

var (
	binDir   string
	chromium string
	local    *dynamotest.Local
)

func TestMain(m *testing.M) {
	os.Exit(setup(m))
}

func setup(m *testing.M) int {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	// The project's own script installs Chromium when it is missing, as scripts/dynamodb-local.sh
	// does for DynamoDB Local.
	install := exec.Command(filepath.Join(root, "scripts", "chromium.sh"))
	install.Stderr = os.Stderr
	out, err := install.Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "scripts/chromium.sh:", err)
		return 1
	}
	chromium = strings.TrimSpace(string(out))

	dir, cleanup, err := testbin.Build(nil, "./cmd/command-api", "./cmd/projector", "./cmd/query-api", "./cmd/keycloak-sync")
	if err != nil {
		fmt.Fprintln(os.Stderr, "build binaries:", err)
		return 1
	}
	defer cleanup()
	binDir = dir
	l, err := dynamotest.Start(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer l.Stop()
	local = l
	return m.Run()
}

// install is one ssodir installation: its own table prefix, the four services' addresses
// chosen before any starts, so that each can allow the console's origin (the query API).
type install struct {
	t      *testing.T
	prefix string
	key    string
	addrs  map[string]string
	extra  []string
	// noConsoleAddrs starts the query API without SSO_CONSOLE_* (a development setup
	// where the user types the addresses).
	noConsoleAddrs bool
}

func newInstall(t *testing.T, extra ...string) *install {
	t.Helper()
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i*11 + 5)
	}
	in := &install{t: t, prefix: dynamotest.UniqueName("console"), key: base64.StdEncoding.EncodeToString(key), addrs: map[string]string{}, extra: extra}
	for _, name := range []string{"command-api", "query-api", "projector", "keycloak-sync"} {
		in.addrs[name] = freeAddr(t)
	}
	return in
}

func (in *install) url(name string) string { return "http://" + in.addrs[name] }

var addrVar = map[string]string{"command-api": "SSO_COMMAND_ADDR", "query-api": "SSO_QUERY_ADDR", "projector": "SSO_PROJECTOR_ADDR", "keycloak-sync": "SSO_KEYCLOAK_SYNC_ADDR"}

// cursorKey is the query API's SSO_CURSOR_KEY (its own key, not SSO_SECRET_KEY).
const cursorKey = "ZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXp7fH1+f4CBgoM="

// service is a running process of an install.
type service struct {
	t    *testing.T
	name string
	addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// pause stops the process where it is (SIGSTOP): it keeps its port and accepts
// connections, and answers nothing, as a service stuck or overloaded does. It returns once
// the kernel reports the process stopped.
func (s *service) pause() {
	s.t.Helper()
	s.signal(syscall.SIGSTOP)
	s.waitState(true)
	c := http.Client{Timeout: 300 * time.Millisecond}
	if resp, err := c.Get("http://" + s.addr + "/healthz"); err == nil {
		resp.Body.Close()
		s.t.Fatalf("%s answered %d while the kernel reports it stopped", s.name, resp.StatusCode)
	}
}

// resume lets a paused process go on (SIGCONT), and returns once it runs.
func (s *service) resume() {
	s.t.Helper()
	s.signal(syscall.SIGCONT)
	s.waitState(false)
}

// waitState waits until /proc says the process is stopped (state T), or is not.
func (s *service) waitState(stopped bool) {
	s.t.Helper()
	path := fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile(path)
		if err != nil {
			s.t.Fatalf("%s: %v", s.name, err)
		}
		// The state follows the command name in parentheses: "pid (comm) S …".
		_, rest, _ := strings.Cut(string(b), ") ")
		if (strings.HasPrefix(rest, "T") || strings.HasPrefix(rest, "t")) == stopped {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s is not %s after 10 s: %s", s.name, map[bool]string{true: "stopped", false: "running"}[stopped], b)
		}
	}
}

// kill ends the process at once and waits until it is gone.
func (s *service) kill() {
	s.t.Helper()
	_ = s.cmd.Process.Kill()
	<-s.done
}

func (s *service) signal(sig syscall.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %s to %s: %v", sig, s.name, err)
	}
}

// consoleEnv tells the query API where the console finds the other services (as make run
// does); an install made with noConsoleAddrs leaves the console to the user's settings.
func (in *install) consoleEnv() []string {
	if in.noConsoleAddrs {
		return nil
	}
	return []string{"SSO_CONSOLE_COMMAND_API=" + in.url("command-api"), "SSO_CONSOLE_PROJECTOR=" + in.url("projector"),
		"SSO_CONSOLE_KEYCLOAK_SYNC=" + in.url("keycloak-sync")}
}

// start runs a service until the test ends and waits until /readyz answers 200.
func (in *install) start(name string, extra ...string) *service {
	t := in.t
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, name))
	cmd.Env = append(append(local.Env(),
		"SSO_TABLE_PREFIX="+in.prefix, "SSO_SECRET_KEY="+in.key, "SSO_CURSOR_KEY="+cursorKey, "SSO_BOOTSTRAP_TOKEN="+token,
		"SSO_STREAM_POLL=20ms", "SSO_PROVISION_WAIT=1m", "SSO_CORS_ORIGINS="+in.url("query-api"),
		addrVar[name]+"="+in.addrs[name], "PATH="+os.Getenv("PATH"), "HOME="+os.Getenv("HOME")), append(in.extra, extra...)...)
	if name == "query-api" {
		cmd.Env = append(cmd.Env, in.consoleEnv()...)
	}
	var mu sync.Mutex
	var logs bytes.Buffer
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			mu.Lock()
			logs.WriteString(sc.Text() + "\n")
			mu.Unlock()
		}
	}()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); pw.Close(); close(done) }()
	output := func() string { mu.Lock(); defer mu.Unlock(); return logs.String() }
	svc := &service{t: t, name: name, addr: in.addrs[name], cmd: cmd, done: done}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT) // a paused process handles SIGTERM only once it runs
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, output())
		}
	})
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-done:
			t.Fatalf("%s exited during start:\n%s", name, output())
		default:
		}
		resp, err := http.Get(in.url(name) + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return svc
			}
		}
	}
	t.Fatalf("%s not ready:\n%s", name, output())
	return nil
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// call is one request with the development token; it answers the status and body.
func call(t *testing.T, method, url string, body any, headers ...string) (int, http.Header, []byte) {
	t.Helper()
	return apitest.Call(t, token, method, url, body, headers...)
}

// mustCall is call that fails the test unless the status is want.
func mustCall(t *testing.T, want int, method, url string, body any, headers ...string) []byte {
	t.Helper()
	status, _, b := call(t, method, url, body, headers...)
	if status != want {
		t.Fatalf("%s %s: %d %s (want %d)", method, url, status, b, want)
	}
	return b
}

// browser is a headless Chromium for one test, with what its pages reported as errors.
type browser struct {
	t      *testing.T
	ctx    context.Context
	mu     sync.Mutex
	errors []string
	// unreachable lets Chromium's own log of a connection that failed (a service stopped
	// on purpose) pass; exceptions and unhandled rejections still fail the test.
	unreachable bool
}

// newBrowser starts Chromium with a fresh profile and the flags this closed network needs
// (no background traffic that would wait on the outside world).
func newBrowser(t *testing.T) *browser {
	t.Helper()
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900))
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx}
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium %s: %v", chromium, err)
	}
	b.watch(ctx)
	return b
}

// tab opens another tab of the same browser: it shares the browser's storage but not the
// first tab's session (sessionStorage is per tab).
func (b *browser) tab() context.Context {
	ctx, cancel := chromedp.NewContext(b.ctx)
	b.t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		b.t.Fatalf("open tab: %v", err)
	}
	b.watch(ctx)
	return ctx
}

// watch records console errors, uncaught exceptions and errors of the browser's log. A
// response the console expects and handles (404 after a delete, 412 on a conflict) is
// logged by Chromium as "Failed to load resource … status of 4xx": not a console error.
func (b *browser) watch(ctx context.Context) {
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type != chromedp.ConsoleError && !m.IsException() || handledStatus(m) {
				continue
			}
			b.mu.Lock()
			if b.unreachable && !m.IsException() && m.Source == "network" && strings.Contains(m.Text, "net::ERR_") {
				b.mu.Unlock()
				continue
			}
			b.errors = append(b.errors, fmt.Sprintf("%s (%s %s:%d)", m, m.Source, m.URL, m.Line))
			b.mu.Unlock()
		}
	}()
}

func handledStatus(m chromedp.ConsoleMessage) bool {
	return m.Source == "network" && strings.HasPrefix(m.Text, "Failed to load resource: the server responded with a status of 4")
}

// noErrors fails the test if any page reported an error so far.
func (b *browser) noErrors() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errors) > 0 {
		b.t.Fatalf("browser reported errors:\n%s", strings.Join(b.errors, "\n"))
	}
}

type action = chromedp.Action[chromedp.Void]

// run runs actions in ctx with a time limit, failing the test with the step that broke.
func (b *browser) run(ctx context.Context, step string, actions ...action) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		b.t.Fatalf("%s: %v\npage text:\n%s", step, err, body)
	}
	b.noErrors()
}

// void drops an action's value.
func void[T any](a chromedp.Action[T]) action {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := a(ctx, t)
		return chromedp.Void{}, err
	}
}

func poll(js string) action {
	return void(chromedp.Poll[bool](js, chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
}

// waitText waits until the element sel's text contains want.
func waitText(sel, want string) action {
	return poll(fmt.Sprintf(`(() => { const el = document.querySelector(%q); return !!el && el.innerText.includes(%q); })()`, sel, want))
}

// waitNoText waits until the element sel exists and its text lacks unwanted.
func waitNoText(sel, unwanted string) action {
	return poll(fmt.Sprintf(`(() => { const el = document.querySelector(%q); return !!el && !el.innerText.includes(%q); })()`, sel, unwanted))
}

// waitPositive waits until the fact of the list sel whose term starts with term is a number
// above zero.
func waitPositive(sel, term string) action {
	return poll(fmt.Sprintf(`(() => { const dt = [...document.querySelectorAll(%q + ' dt')].find((d) => d.innerText.startsWith(%q)); return !!dt && Number(dt.nextElementSibling.innerText) > 0; })()`, sel, term))
}

// waitFor waits until the selector matches.
func waitFor(sel string) action {
	return poll(fmt.Sprintf(`!!document.querySelector(%q)`, sel))
}

// setValue replaces an input's value and lets the page hear it, as typing would.
func setValue(sel, value string) action {
	return void(chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const el = document.querySelector(%q); el.value = %q; el.dispatchEvent(new Event('input', {bubbles: true})); el.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`, sel, value)))
}

// goHash moves the page to another route of the console (a same-document navigation,
// which chromedp.Navigate would wait on for a load that never comes).
func goHash(hash string) action {
	return void(chromedp.Evaluate[bool](fmt.Sprintf(`(location.hash = %q, true)`, hash)))
}

func click(sel string) action          { return chromedp.Click(chromedp.CSS(sel)) }
func typeText(sel, text string) action { return chromedp.SendKeys(chromedp.CSS(sel), text) }

// The detector itself: a page's console.error and an uncaught exception are both caught,
// and an API answer the console handles (a 4xx) is not.
func TestBrowserErrorsAreCaught(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, `<!doctype html><link rel="icon" href="data:,"><script>
fetch("/missing").then(() => { console.error("boom"); setTimeout(() => { throw new Error("thrown"); }); });
</script>`)
	}))
	defer srv.Close()
	b := newBrowser(t)
	if err := chromedp.Do(b.ctx, chromedp.Navigate(srv.URL)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		got := append([]string(nil), b.errors...)
		b.mu.Unlock()
		if len(got) >= 2 {
			joined := strings.Join(got, "\n")
			if len(got) != 2 || !strings.Contains(joined, "boom") || !strings.Contains(joined, "thrown") {
				t.Fatalf("caught:\n%s", joined)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("caught only %q", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// labelled checks that every visible form control of the page has a label, and every
// button a name: what a screen reader announces and a keyboard user tabs to.
func labelled() action {
	return poll(`[...document.querySelectorAll("input, select, textarea")].filter((el) => el.offsetParent !== null).every((el) => el.labels && el.labels.length > 0)
		&& [...document.querySelectorAll("button, a[href]")].filter((el) => el.offsetParent !== null).every((el) => (el.getAttribute("aria-label") || el.innerText).trim() !== "")`)
}
