// Package testbin builds ssodir's commands for the tests that run them as processes (the
// Go client's, ssodirctl's, the console's and the end-to-end tests), once for all the
// test packages of a `go test ./...` run rather than once in each.
//
// Linking is what a build of an unchanged tree costs — seconds of CPU per binary, more with
// the race detector — and Go's build cache keeps compiled packages but not linked
// binaries. Build links each command into a directory of the checkout's cache shared by
// the test packages, one directory per set of build flags, where `go build` itself decides
// whether a binary there is up to date: it relinks one whose recorded build ID is not the
// one the sources, flags and toolchain give now. A stale binary is never used. The test
// gets hard links to the binaries in a directory of its own, so that a later rebuild,
// which replaces the shared files, never changes one a test is running.
package testbin

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Build builds the commands (paths such as ./cmd/query-api, relative to the module root)
// with the go build flags and returns a directory holding them by their names, and a
// function that removes that directory. Build output goes to the process's stderr.
func Build(flags []string, cmds ...string) (dir string, cleanup func(), err error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", nil, err
	}
	// The checkout's own cache, as the Makefile's CACHE_DIR: SSODIR_CACHE_DIR when set
	// (several checkouts may share it, so the directory is per checkout and per flags).
	cache := os.Getenv("SSODIR_CACHE_DIR")
	if cache == "" {
		cache = filepath.Join(root, ".cache")
	}
	return build(root, cache, flags, cmds)
}

// build is Build for the module at root, with the cache directory cache.
func build(root, cache string, flags, cmds []string) (dir string, cleanup func(), err error) {
	sum := sha256.Sum256([]byte(root + "\x00" + strings.Join(flags, "\x00")))
	shared := filepath.Join(cache, "testbin", hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(shared, 0o755); err != nil {
		return "", nil, err
	}
	// One build at a time in the shared directory: a second package waits for the first
	// one's links, then finds its binaries up to date.
	lock, err := os.OpenFile(shared+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", nil, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", nil, fmt.Errorf("lock %s: %w", shared, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	args := append(append([]string{"build"}, flags...), append([]string{"-o", shared + "/"}, cmds...)...)
	build := exec.Command("go", args...)
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", nil, fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	sweep(filepath.Dir(shared))
	own, err := os.MkdirTemp(filepath.Dir(shared), "run-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(own) }
	for _, c := range cmds {
		name := filepath.Base(c)
		if err := linkOrCopy(filepath.Join(shared, name), filepath.Join(own, name)); err != nil {
			cleanup()
			return "", nil, err
		}
	}
	return own, cleanup, nil
}

// sweep removes the directories of runs that ended without removing theirs (a test binary
// killed): those older than a day, far longer than any test package runs.
func sweep(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "run-") {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > 24*time.Hour {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

func linkOrCopy(from, to string) error {
	if err := os.Link(from, to); err == nil {
		return nil
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// ModuleRoot is the module's root directory, found from this file's location: the checkout
// the test binaries and DynamoDB Local's script come from.
func ModuleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("testbin: cannot locate source")
	}
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testbin: go.mod not found above " + file)
		}
		dir = parent
	}
}
