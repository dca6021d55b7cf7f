// Package devrun tests `make run` (scripts/run-dev.sh) as a newcomer meets it: the
// README's first ssodirctl commands run as they are written, the data outlives a restart,
// and the runner says which process ended, or that it was interrupted.
package devrun

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
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

// block is one fenced block of README.md: its language and its text.
type block struct {
	lang, text string
}

// readmeBlocks is every fenced block of README.md, in order.
func readmeBlocks(t *testing.T, root string) []block {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []block
	var cur *block
	for _, line := range strings.SplitAfter(string(readme), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &block{lang: strings.TrimPrefix(trimmed, "```")}
		case cur != nil && trimmed == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += line
		}
	}
	if cur != nil {
		t.Fatalf("README.md's last block (%s) is not closed", cur.lang)
	}
	return blocks
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

// devEnv is what every run and every command of the test gets: work is a fresh checkout
// (links to the repository's files, without .data/ and bin/), bin is its bin/, and env
// has a Go bin directory of its own (GOPATH), off the PATH, and no ssodirctl on the PATH.
type devEnv struct {
	root, work, bin, gopath string
	env                     []string
}

// start runs `make target` in the work directory, as a newcomer does, and waits until it
// says that ssodir is running.
func (d *devEnv) start(t *testing.T, target string) *run {
	t.Helper()
	r := &run{cmd: exec.Command("make", target), done: make(chan struct{})}
	r.cmd.Dir = d.work
	r.cmd.Env = d.env
	r.cmd.Stdout, r.cmd.Stderr = r, r
	// Its own process group, so that the test can end everything it started.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.err = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() { r.stop(t) })
	// make run builds the binaries first: in a fresh checkout, on a loaded machine, that
	// may take minutes.
	deadline := time.After(12 * time.Minute)
	for !strings.Contains(r.output(), "ssodir is running") {
		select {
		case <-r.done:
			t.Fatalf("make run ended before it was running (%v):\n%s", r.err, r.output())
		case <-deadline:
			t.Fatalf("make run not running within 12 minutes:\n%s", r.output())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return r
}

// interrupt is Ctrl-C in the terminal: SIGINT to the whole process group (make, the
// runner and what it started); the runner stops the rest.
func (r *run) interrupt(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(-r.cmd.Process.Pid, syscall.SIGINT); err != nil {
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
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-r.done:
		case <-time.After(time.Minute):
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
			<-r.done
		}
	}
}

// shell runs a shell script in the work directory (the checkout's root), with the Go bin
// directory the README's install block puts ssodirctl in on the PATH.
func (d *devEnv) shell(t *testing.T, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+script)
	cmd.Dir = d.work
	cmd.Env = append(d.env, "PATH="+filepath.Join(d.gopath, "bin")+":"+d.path())
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

// path is the test's PATH: its own, without any directory that holds an ssodirctl.
func (d *devEnv) path() string {
	var keep []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(dir, "ssodirctl")); err != nil {
			keep = append(keep, dir)
		}
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}

// checkout makes work a fresh checkout of root: a link to each of its entries but .git,
// .data and bin.
func checkout(t *testing.T, root, work string) {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch e.Name() {
		case ".git", ".data", "bin":
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(work, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// goEnv is `go env NAME` of the test's own environment.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// section is what the README session printed between the marker of block n and the next.
func section(out string, n int) string {
	_, after, _ := strings.Cut(out, fmt.Sprintf("### README block %d\n", n))
	before, _, _ := strings.Cut(after, "### README block ")
	return before
}

// TestMakeRun is a newcomer's first hour: in a fresh checkout it starts `make run-clean`,
// runs every command block of README.md in order, in one shell, as written (only the
// default addresses are the test's ports), stops it with Ctrl-C, starts `make run` again
// and finds the users, then kills one service and expects the runner to name it and its log.
func TestMakeRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts DynamoDB Local and the four services twice")
	}
	root := repoRoot(t)
	tmp := t.TempDir()
	// The checkout has one path per repository, made afresh each run: Go's build cache
	// keys packages by their directory, so a later run builds only what changed.
	sum := sha256.Sum256([]byte(root))
	work := filepath.Join(os.TempDir(), "ssodir-devrun-"+hex.EncodeToString(sum[:6]))
	if err := os.RemoveAll(work); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(work) })
	d := &devEnv{root: root, work: work, gopath: filepath.Join(tmp, "gopath")}
	d.bin = filepath.Join(d.work, "bin")
	checkout(t, root, d.work)

	// The README's blocks: its first runs make; every other sh block runs in the session.
	blocks := readmeBlocks(t, root)
	if len(blocks) == 0 || blocks[0].lang != "sh" {
		t.Fatalf("README.md does not begin with a sh block: %+v", blocks)
	}
	var makeTargets []string
	for _, line := range strings.Split(strings.TrimSpace(blocks[0].text), "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		makeTargets = append(makeTargets, strings.TrimSpace(cmd))
	}
	if strings.Join(makeTargets, ",") != "make run,make run-clean,make test" {
		t.Fatalf("README.md's first block is not make run, make run-clean, make test: %q", makeTargets)
	}
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", freePort(t)) }
	command, query := addr(), addr()
	addresses := strings.NewReplacer("localhost:8080", command, "127.0.0.1:8080", command,
		"localhost:8081", query, "127.0.0.1:8081", query)
	var session strings.Builder
	var sh []int // the numbers of the README's sh blocks the session runs
	for i, b := range blocks[1:] {
		switch b.lang {
		case "sh":
			n := i + 2
			sh = append(sh, n)
			fmt.Fprintf(&session, "echo '### README block %d'\n%s", n, addresses.Replace(b.text))
		case "go":
			// Go code for the client, not a command.
		default:
			t.Fatalf("README.md's block %d is %q: test/devrun knows sh and go blocks", i+2, b.lang)
		}
	}
	session.WriteString("echo '### README block end'\ncommand -v ssodirctl\n")

	var env []string
	for _, kv := range os.Environ() {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "GOBIN", "GOPATH", "PATH", "SSODIR_DATA_DIR", "SSODIR_BIN_DIR":
		default:
			env = append(env, kv)
		}
	}
	d.env = append(env, "PATH="+d.path(),
		// A Go bin directory of the test's own, off the PATH; the modules it has already.
		"GOPATH="+d.gopath, "GOMODCACHE="+goEnv(t, "GOMODCACHE"), "GOCACHE="+goEnv(t, "GOCACHE"),
		fmt.Sprintf("DYNAMODB_LOCAL_PORT=%d", freePort(t)),
		"SSO_COMMAND_ADDR="+command, "SSO_QUERY_ADDR="+query, "SSO_PROJECTOR_ADDR="+addr(), "SSO_KEYCLOAK_SYNC_ADDR="+addr(),
		// ssodirctl's defaults are the default addresses; the test's services are elsewhere.
		"SSODIR_COMMAND_URL=http://"+command, "SSODIR_QUERY_URL=http://"+query)

	first := d.start(t, "run-clean")
	scimBase := "http://" + command + "/scim/v2/demo/acme"
	if !strings.Contains(first.output(), "SCIM base URL  "+scimBase) {
		t.Errorf("make run does not print the demo tenant's SCIM base URL %s:\n%s", scimBase, first.output())
	}
	readme := exec.Command("bash", "-c", "set -euo pipefail\n"+session.String())
	readme.Dir = d.work
	readme.Env = d.env
	outBytes, err := readme.CombinedOutput()
	out := string(outBytes)
	if err != nil {
		t.Fatalf("the README's command blocks failed (%v):\n%s\n--- output:\n%s", err, session.String(), out)
	}
	_, which, _ := strings.Cut(out, "### README block end\n")
	if got, want := strings.TrimSpace(which), filepath.Join(d.gopath, "bin", "ssodirctl"); got != want {
		t.Errorf("after the README's blocks, ssodirctl is %q, want the one make install put in %s", got, want)
	}
	if len(sh) != 4 {
		t.Fatalf("README.md has sh blocks %v after its first; this test knows four (curl, install, first commands, SCIM)", sh)
	}
	checks := [][]string{
		// The create, the read that waits for it, and a list that shows it.
		{`"username":"asmith"`, `"items":[{`},
		{"ssodirctl is " + filepath.Join(d.gopath, "bin", "ssodirctl")},
		{"users: 8 created, 0 unchanged, 0 conflicts", "asmith", "bsmythe", "esmall", "cjones"},
		{"okta-local", `"totalResults":0`, scimBase + "/Users/", `"active":false`, "revoked"},
	}
	for i, n := range sh {
		got := section(out, n)
		for _, want := range checks[i] {
			if !strings.Contains(got, want) {
				t.Errorf("README block %d did not print %q:\n%s", n, want, got)
			}
		}
	}
	if list := strings.TrimSpace(section(out, sh[0])); !strings.HasPrefix(list[strings.LastIndex(list, "\n")+1:], `{"items":[{`) ||
		!strings.Contains(list[strings.LastIndex(list, "\n")+1:], `"username":"asmith"`) {
		t.Errorf("the README's list after the create does not show asmith:\n%s", list)
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
	// The list reads the view, which the projector brings to the deactivation shortly after
	// the PATCH answered: ask again for a while.
	var (
		scimUser string
		made     []struct {
			Username string
			IsActive bool `json:"is_active"`
		}
		listErr error
	)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		scimUser = d.shell(t, `export SSODIR_TOKEN=$(cat .data/dev-token) SSODIR_SYSTEM=demo SSODIR_TENANT=acme
ssodirctl users list --email kwong@example.com -o json`)
		made = nil
		listErr = json.Unmarshal([]byte(scimUser), &made)
		if listErr == nil && len(made) == 1 && !made[0].IsActive || time.Now().After(deadline) {
			break
		}
	}
	if listErr != nil || len(made) != 1 || made[0].Username != "kwong@example.com" || made[0].IsActive {
		t.Errorf("the user the README's SCIM block made and deactivated is %s (%v)", scimUser, listErr)
	}

	first.interrupt(t)
	if o := first.output(); !strings.Contains(o, "stopping (interrupted)") || strings.Contains(o, "exited") {
		t.Errorf("Ctrl-C printed:\n%s", o)
	}

	second := d.start(t, "run")
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
