package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
)

// The tenant every scenario works in, and the token it uses.
const (
	benchSystem = "bench"
	benchTenant = "t1"
	benchToken  = "ssodir-bench-token"
)

// bench is what all scenarios share: the built binaries, the secret key, an HTTP client and
// the peak memory seen per process.
type bench struct {
	binDir  string
	keepBin bool
	key     string
	http    *http.Client
	log     io.Writer
	// profiles is where services write CPU profiles (SSO_CPU_PROFILE), if set.
	profiles string

	mu   sync.Mutex
	peak map[string]int64
	// shared is the one DynamoDB Local of a run that does not start one per scenario.
	shared *dynamotest.Local
	// jvm is how DynamoDB Local is started: with the JVM's optimizing compiler for a
	// measurement, without it for the tiny scale's run through every scenario, a test
	// (dynamotest.Options).
	jvm dynamotest.Options
}

// newBench builds the services into binDir, or a temporary directory removed at the end
// when binDir is empty (keep them to resolve symbols of a system-wide perf profile).
func newBench(ctx context.Context, log io.Writer, binDir string) (*bench, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return nil, fmt.Errorf("find the module root (go list -m): %w", err)
	}
	root := strings.TrimSpace(string(out))
	dir, keep := binDir, binDir != ""
	if keep {
		if dir, err = filepath.Abs(dir); err == nil {
			err = os.MkdirAll(dir, 0o755)
		}
	} else {
		dir, err = os.MkdirTemp("", "ssodir-bench-bin")
	}
	if err != nil {
		return nil, err
	}
	// No -race: the services are measured as they run in production.
	build := exec.CommandContext(ctx, "go", "build", "-o", dir+"/", "./cmd/command-api", "./cmd/query-api", "./cmd/projector", "./cmd/keycloak-sync", "./cmd/ssodirctl")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		if !keep {
			os.RemoveAll(dir)
		}
		return nil, fmt.Errorf("build the services: %v\n%s", err, out)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	return &bench{
		binDir: dir, keepBin: keep, key: base64.StdEncoding.EncodeToString(key),
		http: &http.Client{Transport: tr, Timeout: 60 * time.Second},
		log:  log, peak: map[string]int64{},
	}, nil
}

func (b *bench) close() {
	if b.shared != nil {
		b.record("dynamodb-local", jvmPeak(b.shared))
		b.shared.Stop()
	}
	if !b.keepBin {
		os.RemoveAll(b.binDir)
	}
}

// record keeps the highest peak RSS seen for a process name.
func (b *bench) record(name string, bytes int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if bytes > b.peak[name] {
		b.peak[name] = bytes
	}
}

func (b *bench) logf(format string, args ...any) { fmt.Fprintf(b.log, format+"\n", args...) }

// env is one scenario's installation: a DynamoDB Local of its own (DYNAMODB-LOCAL.md, trap
// 1: a stream table whose first record follows many records of other tables is slow), a
// table prefix, and the services it has started.
type env struct {
	b        *bench
	local    *dynamotest.Local
	own      bool
	prefix   string
	names    dynamo.Names
	db       *dynamodb.Client
	streams  *dynamodbstreams.Client
	services []*service
	jvm      int
}

func (b *bench) newEnv(ctx context.Context, fresh bool) (*env, error) {
	local := b.shared
	if fresh || local == nil {
		l, err := dynamotest.StartWith(ctx, b.jvm)
		if err != nil {
			return nil, err
		}
		local = l
		if !fresh {
			b.shared = l
		}
	}
	prefix := dynamotest.UniqueName("bench")
	return &env{b: b, local: local, own: fresh, prefix: prefix, names: dynamo.Names{Prefix: prefix},
		db: local.DynamoDB(), streams: local.Streams()}, nil
}

// close stops the scenario's services and, if it has its own, DynamoDB Local.
func (e *env) close() {
	for _, s := range e.services {
		_ = s.stop()
	}
	if e.own {
		e.b.record("dynamodb-local", jvmPeak(e.local))
		e.local.Stop()
	}
}

// service is a running ssodir binary.
type service struct {
	name string
	addr string
	cmd  *exec.Cmd
	done chan struct{}
	out  *tail
	b    *bench
}

var addrVar = map[string]string{"command-api": "SSO_COMMAND_ADDR", "query-api": "SSO_QUERY_ADDR", "projector": "SSO_PROJECTOR_ADDR",
	"keycloak-sync": "SSO_KEYCLOAK_SYNC_ADDR"}

// cursorKey is the query API's SSO_CURSOR_KEY (its own key, not SSO_SECRET_KEY).
const cursorKey = "ZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXp7fH1+f4CBgoM="

// command is a binary with the scenario's environment (and extra variables).
func (e *env) command(name string, args []string, extra ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(e.b.binDir, name), args...)
	cmd.Env = append(append(e.local.Env(),
		"SSO_TABLE_PREFIX="+e.prefix, "SSO_SECRET_KEY="+e.b.key, "SSO_CURSOR_KEY="+cursorKey, "SSO_BOOTSTRAP_TOKEN="+benchToken,
		"SSO_LOG_LEVEL=info", "SSO_PROGRESS_TOKEN=bench-progress", "PATH="+os.Getenv("PATH"), "HOME="+os.Getenv("HOME")), extra...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// start runs a binary as a service against the scenario's DynamoDB Local, with extra
// environment variables, and waits until /readyz answers 200.
func (e *env) start(ctx context.Context, name string, extra ...string) (*service, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	extra = append(extra, addrVar[name]+"="+addr)
	if e.b.profiles != "" {
		extra = append(extra, "SSO_CPU_PROFILE="+filepath.Join(e.b.profiles, name))
	}
	cmd := e.command(name, nil, extra...)
	s := &service{name: name, addr: addr, cmd: cmd, done: make(chan struct{}), out: &tail{}, b: e.b}
	cmd.Stdout, cmd.Stderr = s.out, s.out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait(); close(s.done) }()
	go e.b.watchRSS(name, cmd.Process.Pid, s.done)
	e.services = append(e.services, s)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return nil, fmt.Errorf("%s exited during start:\n%s", name, s.out)
		case <-ctx.Done():
			return nil, ctx.Err()
		default:
		}
		resp, err := e.b.http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, fmt.Errorf("%s not ready within 60s:\n%s", name, s.out)
}

// finished is what runOnce measured of a process.
type finished struct {
	// took is from start to exit; firstOutput until it first printed to stdout.
	took, firstOutput time.Duration
	cpu               time.Duration
}

// runOnce runs a binary's subcommand to its end.
func (e *env) runOnce(ctx context.Context, name string, args ...string) (finished, error) {
	var f finished
	cmd := e.command(name, args)
	out := &tail{}
	t := time.Now()
	var once sync.Once
	cmd.Stdout = io.MultiWriter(out, writerFunc(func(p []byte) (int, error) {
		once.Do(func() { f.firstOutput = time.Since(t) })
		return len(p), nil
	}))
	cmd.Stderr = out
	err := cmd.Start()
	if err == nil {
		done := make(chan struct{})
		go e.b.watchRSS(name, cmd.Process.Pid, done)
		err = cmd.Wait()
		close(done)
	}
	f.took = time.Since(t)
	if err != nil {
		return f, fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	// Warnings (retries, backoffs; the AWS SDK's own are plain text) explain slow runs.
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, `"level":"warn"`) || strings.Contains(line, `"level":"error"`) || strings.Contains(line, " WARN ") {
			e.b.logf("   %s: %s", name, line)
		}
	}
	f.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return f, ctx.Err()
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// watchRSS records a process's peak resident set size (VmHWM) every 100 ms until done. The
// rusage of a finished child cannot serve: Go starts children with CLONE_VM, so their
// ru_maxrss includes this process's memory.
func (b *bench) watchRSS(name string, pid int, done <-chan struct{}) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		b.record(name, vmHWM(pid))
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
}

// url is the service's base URL.
func (s *service) url() string { return "http://" + s.addr }

// stop sends SIGTERM and waits for a clean exit; it is a no-op once the process is gone.
func (s *service) stop() error {
	select {
	case <-s.done:
		return nil
	default:
	}
	s.b.record(s.name, vmHWM(s.cmd.Process.Pid))
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(40 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("%s did not stop within 40s of SIGTERM", s.name)
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("%s exited %d after SIGTERM:\n%s", s.name, code, s.out)
	}
	return nil
}

// vmHWM is a process's peak resident set size in bytes (0 if it cannot be read).
func vmHWM(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// jvmPeak is the peak RSS of the DynamoDB Local JVM.
func jvmPeak(l *dynamotest.Local) int64 { return vmHWM(jvmPID(l)) }

// jvmPID is the process id of a DynamoDB Local JVM, found by the port in its command line
// (dynamotest does not expose the process); 0 if it is not found.
func jvmPID(l *dynamotest.Local) int {
	port := l.Endpoint[strings.LastIndexByte(l.Endpoint, ':')+1:]
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmdline, err := os.ReadFile(d + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte("DynamoDBLocal.jar")) {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		for i, a := range args {
			if a == "-port" && i+1 < len(args) && args[i+1] == port {
				pid, _ := strconv.Atoi(filepath.Base(d))
				return pid
			}
		}
	}
	return 0
}

// cpuTime is the CPU time (user and system) a process has used so far; 0 if it is gone.
func cpuTime(pid int) time.Duration { return statCPU(fmt.Sprintf("/proc/%d/stat", pid)) }

// statCPU is the CPU time a /proc stat file (of a process or of one of its threads) counts.
func statCPU(path string) time.Duration {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	// The fields after the command name (which may hold spaces) start with the state;
	// utime and stime are the 12th and 13th of them, in clock ticks (100 per second).
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// jitTime is the CPU time so far of the JVM pid's JIT compiler threads ("C1
// CompilerThread…", "C2 CompilerThread…"), by thread (none if pid is 0 or gone).
func jitTime(pid int) threadTimes { return threadsTime(pid, "C1 Compiler", "C2 Compiler") }

// sqliteTime is the CPU time so far of DynamoDB Local's SQLite thread ("SQLiteQueue[…]"),
// which does the storage work of every table operation, one at a time.
func sqliteTime(pid int) threadTimes { return threadsTime(pid, "SQLiteQueue") }

// threadTimes is the CPU time each of some threads of a process has used so far, by
// thread id.
type threadTimes map[int]time.Duration

// since is the CPU time the threads used after before was read: the sum of each thread's
// own increase, a thread started since counting whole. A thread that ended in between is
// not in t, and what it used after before is left out rather than taken off: the JVM
// ends the compiler threads it no longer needs (UseDynamicNumberOfCompilerThreads), and
// a difference of the live threads' sums then came out negative.
func (t threadTimes) since(before threadTimes) time.Duration {
	var d time.Duration
	for tid, used := range t {
		d += max(used-before[tid], 0)
	}
	return d
}

// threadsTime is the CPU time of each thread of pid whose name starts with one of
// prefixes (none if pid is 0 or gone).
func threadsTime(pid int, prefixes ...string) threadTimes {
	out := threadTimes{}
	if pid == 0 {
		return out
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/[0-9]*", pid))
	for _, t := range tasks {
		comm, err := os.ReadFile(t + "/comm")
		if err != nil || !slices.ContainsFunc(prefixes, func(p string) bool { return bytes.HasPrefix(comm, []byte(p)) }) {
			continue
		}
		tid, err := strconv.Atoi(filepath.Base(t))
		if err != nil {
			continue
		}
		out[tid] = statCPU(t + "/stat")
	}
	return out
}

// cpuSnapshot is the CPU time used so far by the bench, the scenario's running services
// and its DynamoDB Local.
type cpuSnapshot map[string]time.Duration

func (e *env) cpu() cpuSnapshot {
	snap := cpuSnapshot{"ssodir-bench": cpuTime(os.Getpid())}
	if jvm := e.jvmPID(); jvm != 0 {
		snap["dynamodb-local"] = cpuTime(jvm)
	}
	for _, s := range e.services {
		select {
		case <-s.done:
		default:
			snap[s.name] += cpuTime(s.cmd.Process.Pid)
		}
	}
	return snap
}

// jvmPID is the process id of the scenario's DynamoDB Local (0 if not found).
func (e *env) jvmPID() int {
	if e.jvm == 0 {
		e.jvm = jvmPID(e.local)
	}
	return e.jvm
}

// addCPU adds to figures the CPU milliseconds per operation each process spent since
// before: where the machine's cores went (the bench process includes the in-process
// work of the replay and the reconcile, and the client side of the others).
func (e *env) addCPU(figures map[string]float64, before cpuSnapshot, ops int) {
	for name, t := range e.cpu() {
		// A service started since before (the projector of the catch-up) counts from 0;
		// one that used nothing (idle, or not part of the baseline) is left out.
		if used := t - before[name]; ops > 0 && used > 0 {
			figures["cpu_ms_per_op."+name] = ms(used) / float64(ops)
		}
	}
}

// selfPeak is the bench process's own peak RSS: it runs the replay and the Keycloak
// reconcile in-process.
func selfPeak() int64 { return vmHWM(os.Getpid()) }

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// tail keeps the last 16 KiB a process printed, for error messages.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	// Trimming only past twice the size keeps the copying to one byte per byte written.
	if len(t.buf) > 32<<10 {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-16<<10:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// call sends one API request with the bench token and returns the status, headers and
// body. A status >= 500 or a transport error is an error.
func (b *bench) call(ctx context.Context, method, url string, body []byte, header ...string) (int, http.Header, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+benchToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	if resp.StatusCode >= 500 {
		return resp.StatusCode, resp.Header, data, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, data)
	}
	return resp.StatusCode, resp.Header, data, nil
}

// expect is call that wants one status.
func (b *bench) expect(ctx context.Context, want int, method, url string, body []byte, header ...string) (http.Header, []byte, error) {
	status, h, data, err := b.call(ctx, method, url, body, header...)
	if err != nil {
		return nil, nil, err
	}
	if status != want {
		return nil, nil, fmt.Errorf("%s %s: want %d, got %d %s", method, url, want, status, data)
	}
	return h, data, nil
}

// provision creates the bench tenant through the command API.
func (e *env) provision(ctx context.Context, api *service) error {
	body, _ := json.Marshal(map[string]string{"tenant_id": benchTenant})
	_, _, err := e.b.expect(ctx, http.StatusCreated, "POST", api.url()+"/v1/systems/"+benchSystem+"/tenants", body)
	return err
}

// tenantPath is the API path of the bench tenant.
func tenantPath() string { return "/v1/systems/" + benchSystem + "/tenants/" + benchTenant }

// commandsTable, usersTable and activitiesTable are the bench tenant's first-generation tables.
func (e *env) commandsTable() string { return e.names.Commands(benchSystem, benchTenant) }
func (e *env) usersTable() string    { return e.names.Users(benchSystem, benchTenant, 0) }
func (e *env) activitiesTable() string {
	return e.names.Activities(benchSystem, benchTenant, 0)
}

// window runs a closed-loop measuring window and returns its rate and latency figures and
// the CPU each process spent per operation.
func (e *env) window(ctx context.Context, conc int, d time.Duration, f op) (map[string]float64, error) {
	before := e.cpu()
	s, err := closed(ctx, conc, d, f)
	if err != nil {
		return nil, err
	}
	figures := rateFigures("per_s", s)
	e.addCPU(figures, before, s.ops)
	return figures, nil
}
