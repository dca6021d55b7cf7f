package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
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
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// Lambda mode, the way AWS runs it: each function's bootstrap (built as `make lambda`
// builds it, with the race detector) runs under the AWS Lambda Runtime Interface Emulator,
// which speaks the Runtime API to it exactly as Lambda does. HTTP reaches an API function
// through a gateway that turns requests into HTTP API (payload 2.0) events, as API Gateway
// and Function URLs do; stream records reach a consumer through esmtest's ESM player.

// rieModule is the emulator, pinned (the module proxy serves no tagged version).
const rieModule = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@v0.0.0-20261030222936-bef5c4ba774d"

var (
	lambdaOnce  sync.Once
	lambdaDir   string
	rieBin      string
	lambdaSetup error
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// lambdaBuild gives each function its bootstrap and installs the emulator (once, into the
// shared cache) the first time a Lambda test runs.
func lambdaBuild(t *testing.T) {
	t.Helper()
	lambdaOnce.Do(func() {
		root := repoRoot()
		cache := os.Getenv("SSODIR_CACHE_DIR")
		if cache == "" {
			cache = filepath.Join(root, ".cache")
		}
		gobin := filepath.Join(cache, "gobin")
		rieBin = filepath.Join(gobin, "aws-lambda-rie")
		if _, err := os.Stat(rieBin); err != nil {
			cmd := exec.Command("go", "install", rieModule)
			cmd.Env = append(os.Environ(), "GOBIN="+gobin)
			if out, err := cmd.CombinedOutput(); err != nil {
				lambdaSetup = fmt.Errorf("install the Lambda Runtime Interface Emulator: %v\n%s", err, out)
				return
			}
		}
		lambdaDir = filepath.Join(binDir, "lambda")
		for _, svc := range []string{"command-api", "query-api", "projector", "keycloak-sync"} {
			// TestMain built the services as `make lambda` builds them (the tag leaves out
			// the RPC runtime of go1.x), but for this machine and with the race detector:
			// each function's bootstrap is that executable.
			if err := os.MkdirAll(filepath.Join(lambdaDir, svc), 0o755); err != nil {
				lambdaSetup = err
				return
			}
			if err := os.Link(filepath.Join(binDir, svc), filepath.Join(lambdaDir, svc, "bootstrap")); err != nil {
				lambdaSetup = fmt.Errorf("%s's bootstrap: %v", svc, err)
				return
			}
		}
	})
	if lambdaSetup != nil {
		t.Fatal(lambdaSetup)
	}
}

// function is one Lambda function running under the emulator.
type function struct {
	name   string
	url    string // the emulator's invoke URL
	extra  []string
	e      *env
	cmd    *exec.Cmd
	done   chan struct{}
	logs   *bytes.Buffer
	mu     sync.Mutex
	client *http.Client
	// life guards cmd and done against a crash from another goroutine.
	life sync.Mutex
	// one: an execution environment takes one invocation at a time (the emulator, like
	// Lambda, runs one environment per process; Lambda would start more for concurrent
	// requests).
	one sync.Mutex
	// answered counts the stream batches the function answered (stream).
	answered atomic.Int64
}

// startFunction runs the named function under the emulator with the stage's settings.
func (e *env) startFunction(name string, extra ...string) *function {
	e.t.Helper()
	lambdaBuild(e.t)
	f := &function{name: name, e: e, extra: extra, logs: &bytes.Buffer{}, client: &http.Client{Timeout: 5 * time.Minute}}
	f.start()
	e.t.Cleanup(func() {
		f.kill()
		if e.t.Failed() {
			e.t.Logf("%s (Lambda) output:\n%s", name, tail(notable(f.output()), 40))
		}
	})
	return f
}

func (f *function) start() {
	f.life.Lock()
	defer f.life.Unlock()
	t := f.e.t
	t.Helper()
	// The ports are free when chosen but may be taken before the emulator binds them (by
	// another process, or as the local port of an outgoing connection); then the emulator
	// exits at once and a new pair is tried.
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = f.launch(); err == nil {
			return
		}
	}
	t.Fatalf("the emulator for %s: %v", f.name, err)
}

// launch starts one emulator and waits until it listens; f.life is held.
func (f *function) launch() error {
	t := f.e.t
	addr := freeAddr(t)
	// Each emulator has its own Runtime API port (9001 by default), so that several
	// functions run side by side.
	f.cmd = exec.Command(rieBin, "--runtime-interface-emulator-address", addr, "--runtime-api-address", freeAddr(t),
		filepath.Join(lambdaDir, f.name, "bootstrap"))
	f.cmd.Dir = filepath.Join(lambdaDir, f.name)
	// What Lambda sets, and the stage's settings.
	f.cmd.Env = f.e.vars(append([]string{"AWS_LAMBDA_FUNCTION_NAME=ssodir-e2e-" + f.name, "AWS_LAMBDA_FUNCTION_TIMEOUT=120"}, f.extra...)...)
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	done, err := startLogged(f.cmd, &f.mu, f.logs)
	if err != nil {
		t.Fatalf("start the emulator for %s: %v", f.name, err)
	}
	f.done = done
	cmd := f.cmd
	f.url = "http://" + addr + "/2015-03-31/functions/function/invocations"
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("exited before it listened on %s", addr)
		default:
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			// The Runtime API's port is bound beside the invoke port; a failure to bind it
			// ends the emulator a moment later.
			select {
			case <-done:
				return fmt.Errorf("exited after it listened on %s", addr)
			case <-time.After(200 * time.Millisecond):
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
	return fmt.Errorf("did not listen on %s within 30s", addr)
}

// kill ends the emulator and the function's process at once, as a crash of the
// execution environment does.
func (f *function) kill() {
	f.life.Lock()
	cmd, done := f.cmd, f.done
	f.life.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// revive starts a new execution environment (a cold start) if the last one died or is
// dying.
func (f *function) revive() bool {
	f.life.Lock()
	done := f.done
	f.life.Unlock()
	select {
	case <-done:
		f.start()
		return true
	case <-time.After(2 * time.Second):
		return false
	}
}

func (f *function) output() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.logs.String()
}

// invoke calls the function with one event; a function error (what Lambda reports with
// X-Amz-Function-Error) is returned as an error, like a failed invocation.
func (f *function) invoke(ctx context.Context, event any) ([]byte, error) {
	payload, err := json.Marshal(event)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	f.one.Lock()
	defer f.one.Unlock()
	f.life.Lock()
	req.URL.Host = strings.TrimSuffix(strings.TrimPrefix(f.url, "http://"), "/2015-03-31/functions/function/invocations")
	f.life.Unlock()
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", f.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", f.name, err)
	}
	var fe struct {
		ErrorMessage string `json:"errorMessage"`
		ErrorType    string `json:"errorType"`
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("invoke %s: %s: %s", f.name, resp.Status, body)
	}
	if json.Unmarshal(body, &fe) == nil && fe.ErrorType != "" {
		return nil, fmt.Errorf("%s failed: %s (%s)", f.name, fe.ErrorMessage, fe.ErrorType)
	}
	return body, nil
}

// stream is the ESM player's invoke for a consumer function.
func (f *function) stream(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	body, err := f.invoke(ctx, ev)
	if err != nil {
		// A crashed environment is replaced before ESM retries, as Lambda does.
		f.revive()
		return events.DynamoDBEventResponse{}, err
	}
	var resp events.DynamoDBEventResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return resp, fmt.Errorf("%s answered %s, not a DynamoDBEventResponse: %w", f.name, body, err)
	}
	f.answered.Add(1)
	return resp, nil
}

// task runs a scheduled task, with the constant input deploy/'s schedules send.
func (f *function) task(t *testing.T, name string) {
	t.Helper()
	if _, err := f.invoke(context.Background(), map[string]string{"ssodir_task": name}); err != nil {
		t.Fatalf("task %s: %v", name, err)
	}
}

// gateway serves HTTP on a local address by turning each request into an HTTP API
// (payload 2.0) event for the function, as API Gateway does, and the function's answer
// back into the response. The returned service has the gateway's address, so the tests
// written for the long-running APIs run against the function unchanged. more are further
// execution environments of the same function: as Lambda does for concurrent requests, a
// request goes to one that is free.
func (f *function) gateway(t *testing.T, more ...*function) *service {
	t.Helper()
	free := make(chan *function, 1+len(more))
	for _, fn := range append([]*function{f}, more...) {
		free <- fn
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		headers := map[string]string{}
		for k, vs := range r.Header {
			headers[strings.ToLower(k)] = strings.Join(vs, ",")
		}
		ev := events.APIGatewayV2HTTPRequest{
			Version: "2.0", RouteKey: "$default", RawPath: r.URL.EscapedPath(), RawQueryString: r.URL.RawQuery,
			Headers: headers, Body: base64.StdEncoding.EncodeToString(body), IsBase64Encoded: true,
			RequestContext: events.APIGatewayV2HTTPRequestContext{
				Stage: "$default", RequestID: fmt.Sprint(time.Now().UnixNano()), DomainName: r.Host,
				HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: r.Method, Path: r.URL.Path,
					Protocol: "HTTP/1.1", SourceIP: "127.0.0.1", UserAgent: r.UserAgent()},
			},
		}
		if len(body) == 0 {
			ev.Body, ev.IsBase64Encoded = "", false
		}
		var fn *function
		select {
		case fn = <-free:
		case <-r.Context().Done():
			return
		}
		out, err := fn.invoke(r.Context(), ev)
		free <- fn
		if err != nil {
			// API Gateway's answer to a failed integration.
			http.Error(w, `{"message":"Internal Server Error"}`, http.StatusInternalServerError)
			return
		}
		var resp events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			http.Error(w, `{"message":"Internal Server Error"}`, http.StatusInternalServerError)
			return
		}
		for k, v := range resp.Headers {
			w.Header().Set(k, v)
		}
		for k, vs := range resp.MultiValueHeaders {
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		payload := []byte(resp.Body)
		if resp.IsBase64Encoded {
			if payload, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
				http.Error(w, `{"message":"Internal Server Error"}`, http.StatusInternalServerError)
				return
			}
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(payload)
	}))
	t.Cleanup(srv.Close)
	return &service{name: f.name + " (Lambda)", addr: strings.TrimPrefix(srv.URL, "http://"), cmd: f.cmd, done: f.done, logs: f.logs, mu: &f.mu}
}
