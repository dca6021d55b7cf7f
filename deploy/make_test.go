package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// `make lambda` builds a zip again when a Go source is newer than it, and a stage's build
// (LAMBDA_ARCHS=arm64, what the app runs) only the arm64 ones. make -n: what it would do.
func TestMakeLambdaRebuildsStaleZipsForTheStagesArchitecture(t *testing.T) {
	dir := t.TempDir()
	plan := func() string {
		t.Helper()
		out, err := exec.Command("make", "-n", "-C", "..", "lambda", "LAMBDA_ARCHS=arm64", "LAMBDA_DIR="+dir).CombinedOutput()
		if err != nil {
			t.Fatalf("make -n lambda: %v\n%s", err, out)
		}
		return string(out)
	}
	for _, service := range Services {
		if err := os.WriteFile(filepath.Join(dir, service+"-arm64.zip"), []byte("zip"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	touch := func(when time.Time) {
		for _, service := range Services {
			if err := os.Chtimes(filepath.Join(dir, service+"-arm64.zip"), when, when); err != nil {
				t.Fatal(err)
			}
		}
	}
	touch(time.Now().Add(time.Hour))
	if p := plan(); strings.Contains(p, "go build") {
		t.Errorf("zips newer than every source are built again:\n%s", p)
	}
	touch(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	p := plan()
	for _, service := range Services {
		if !strings.Contains(p, "GOARCH=$arch") || !strings.Contains(p, "stem="+service+"-arm64;") {
			t.Errorf("a stale %s-arm64.zip is not built again:\n%s", service, p)
		}
		if strings.Contains(p, service+"-amd64") {
			t.Errorf("a stage's build makes %s-amd64.zip:\n%s", service, p)
		}
	}
}
