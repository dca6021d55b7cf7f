// Package devrun tests `make run` (scripts/run-dev.sh) as a newcomer meets it: the
// README's first ssodirctl commands run as they are written, the data outlives a restart,
// and the runner says which process ended, or that it was interrupted.
package devrun

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// repoRoot is the repository's root (this package is test/devrun).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// firstCommands is the README's block of first ssodirctl commands, as written there.
func firstCommands(t *testing.T, root string) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "<!-- first-commands")
	if !ok {
		t.Fatal("README.md has no <!-- first-commands --> block")
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatal("README.md's first-commands block is not a ```sh block")
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok || !strings.Contains(block, "ssodirctl import users") {
		t.Fatalf("README.md's first-commands block is not the one expected:\n%s", block)
	}
	return block
}

// run is one `make run`: the runner's process and what it printed.
type run struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error
}

func (r *run) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

func (r *run) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.Write(p)
}

// devEnv is what every run and every ssodirctl command of the test gets.
type devEnv struct {
	root, work, bin string
	env             []string
}

// start runs scripts/run-dev.sh and waits until it says that ssodir is running.
func (d *devEnv) start(t *testing.T) *run {
	t.Helper()
	r := &run{cmd: exec.Command(filepath.Join(d.root, "scripts", "run-dev.sh")), done: make(chan struct{})}
	r.cmd.Dir = d.root
	r.cmd.Env = d.env
	r.cmd.Stdout, r.cmd.Stderr = r, r
	// Its own process group, so that the test can end everything it started.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.err = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() { r.stop(t) })
	deadline := time.After(4 * time.Minute)
	for !strings.Contains(r.output(), "ssodir is running") {
		select {
		case <-r.done:
			t.Fatalf("make run ended before it was running (%v):\n%s", r.err, r.output())
		case <-deadline:
			t.Fatalf("make run not running within 4 minutes:\n%s", r.output())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return r
}

// interrupt is Ctrl-C: SIGINT to the runner, which stops the rest.
func (r *run) interrupt(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r.wait(t)
}

func (r *run) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("make run did not end within 2 minutes:\n%s", r.output())
	}
}

// stop ends whatever is left of the run's process group.
func (r *run) stop(t *testing.T) {
	select {
	case <-r.done:
	default:
		_ = r.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-r.done:
		case <-time.After(time.Minute):
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
			<-r.done
		}
	}
}

// ssodirctl runs a shell script with the built ssodirctl first on the PATH, in the work
// directory (which holds .data/ and examples/ as the repository's root does).
func (d *devEnv) shell(t *testing.T, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+script)
	cmd.Dir = d.work
	cmd.Env = append(d.env, "PATH="+d.bin+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v:\n%s\n--- output:\n%s", err, script, out)
	}
	return string(out)
}

// pidOf is the pid of the process running the binary path.
func pidOf(t *testing.T, path string) int {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/exe")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if exe, err := os.Readlink(p); err == nil && exe == path {
			var pid int
			if _, err := fmt.Sscanf(p, "/proc/%d/exe", &pid); err == nil {
				return pid
			}
		}
	}
	t.Fatalf("no process runs %s", path)
	return 0
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for s := bufio.NewScanner(f); s.Scan(); {
		if strings.TrimSpace(s.Text()) != "" {
			var v map[string]any
			if err := json.Unmarshal(s.Bytes(), &v); err != nil {
				t.Fatalf("%s line %d: %v", path, n+1, err)
			}
			n++
		}
	}
	return n
}

// TestMakeRun starts `make run` on a fresh data directory, runs the README's first
// ssodirctl commands exactly as written, stops it with Ctrl-C, starts it again and finds
// the users, then kills one service and expects the runner to name it and its log.
func TestMakeRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts DynamoDB Local and the four services twice")
	}
	root := repoRoot(t)
	tmp := t.TempDir()
	d := &devEnv{root: root, work: filepath.Join(tmp, "work"), bin: filepath.Join(tmp, "bin")}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", d.bin+"/", "./cmd/command-api", "./cmd/query-api",
		"./cmd/projector", "./cmd/keycloak-sync", "./cmd/ssodirctl")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	copyFile(t, filepath.Join(root, "examples", "people.csv"), filepath.Join(d.work, "examples", "people.csv"))
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", freePort(t)) }
	command, query := addr(), addr()
	d.env = append(os.Environ(),
		"SSODIR_DATA_DIR="+filepath.Join(d.work, ".data"), "SSODIR_BIN_DIR="+d.bin,
		fmt.Sprintf("DYNAMODB_LOCAL_PORT=%d", freePort(t)),
		"SSO_COMMAND_ADDR="+command, "SSO_QUERY_ADDR="+query, "SSO_PROJECTOR_ADDR="+addr(), "SSO_KEYCLOAK_SYNC_ADDR="+addr(),
		// ssodirctl's defaults are the default addresses; the test's services are elsewhere.
		"SSODIR_COMMAND_URL=http://"+command, "SSODIR_QUERY_URL=http://"+query)

	first := d.start(t)
	out := d.shell(t, firstCommands(t, root))
	for _, want := range []string{"users: 8 created, 0 unchanged, 0 conflicts", "asmith", "bsmythe", "esmall", "cjones"} {
		if !strings.Contains(out, want) {
			t.Errorf("the README's first commands did not print %q:\n%s", want, out)
		}
	}
	if n := countLines(t, filepath.Join(d.work, "backup.jsonl")); n != 8 {
		t.Errorf("export users wrote %d users, want the 8 imported", n)
	}
	admins := d.shell(t, `export SSODIR_TOKEN=$(cat .data/dev-token) SSODIR_SYSTEM=demo SSODIR_TENANT=eu
ssodirctl groups members list admins -o json`)
	var members []struct{ Username string }
	if err := json.Unmarshal([]byte(admins), &members); err != nil || len(members) != 2 || members[0].Username != "asmith" || members[1].Username != "cjones" {
		t.Errorf("admins are %s (%v), want asmith and cjones", admins, err)
	}

	first.interrupt(t)
	if o := first.output(); !strings.Contains(o, "stopping (interrupted)") || strings.Contains(o, "exited") {
		t.Errorf("Ctrl-C printed:\n%s", o)
	}

	second := d.start(t)
	users := d.shell(t, `export SSODIR_TOKEN=$(cat .data/dev-token) SSODIR_SYSTEM=demo SSODIR_TENANT=eu
ssodirctl users list -o json`)
	var list []struct{ Username string }
	if err := json.Unmarshal([]byte(users), &list); err != nil || len(list) != 8 {
		t.Errorf("after a restart, the tenant holds %d users (%v), want the 8 of the first run:\n%s", len(list), err, users)
	}

	if err := syscall.Kill(pidOf(t, filepath.Join(d.bin, "projector")), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	second.wait(t)
	o := second.output()
	if !strings.Contains(o, "projector exited (status") || !strings.Contains(o, filepath.Join(d.work, ".data", "logs", "projector.log")) {
		t.Errorf("after the projector was killed, make run printed:\n%s", o)
	}
	if code := second.cmd.ProcessState.ExitCode(); code == 0 {
		t.Errorf("make run exited 0 after a service died")
	}
}
