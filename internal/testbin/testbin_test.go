package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestARebuildFollowsTheSourcesAndLeavesARunningBinaryAlone: a command is linked when its
// sources change and reused while they do not, and a directory Build returned keeps the
// binary it was given when a later Build replaces the shared one.
func TestARebuildFollowsTheSourcesAndLeavesARunningBinaryAlone(t *testing.T) {
	root, cache := t.TempDir(), t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	say := func(word string) {
		write("cmd/hello/main.go", "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Print(\""+word+"\") }\n")
	}
	write("go.mod", "module example.com/hello\n\ngo 1.22\n")
	say("one")
	run := func(dir string) string {
		t.Helper()
		out, err := exec.Command(filepath.Join(dir, "hello")).Output()
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	shared := func() os.FileInfo {
		t.Helper()
		var entries []string
		all, _ := filepath.Glob(filepath.Join(cache, "testbin", "*", "hello"))
		for _, e := range all {
			if !strings.HasPrefix(filepath.Base(filepath.Dir(e)), "run-") {
				entries = append(entries, e)
			}
		}
		if len(entries) != 1 {
			t.Fatalf("shared binaries %v, want one", entries)
		}
		fi, err := os.Stat(entries[0])
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}

	first, cleanFirst, err := build(root, cache, nil, []string{"./cmd/hello"})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanFirst()
	if got := run(first); got != "one" {
		t.Fatalf("first build says %q", got)
	}
	linked := shared()

	again, cleanAgain, err := build(root, cache, nil, []string{"./cmd/hello"})
	if err != nil {
		t.Fatal(err)
	}
	if got := run(again); got != "one" {
		t.Fatalf("unchanged sources: %q", got)
	}
	if !os.SameFile(linked, shared()) {
		t.Error("unchanged sources were linked again")
	}
	cleanAgain()
	if _, err := os.Stat(again); !os.IsNotExist(err) {
		t.Errorf("cleanup left %s: %v", again, err)
	}

	say("two")
	changed, cleanChanged, err := build(root, cache, nil, []string{"./cmd/hello"})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanChanged()
	if got := run(changed); got != "two" {
		t.Fatalf("changed sources: the binary says %q, a stale one", got)
	}
	if got := run(first); got != "one" {
		t.Errorf("the first build's binary changed under it: %q", got)
	}
	if strings.HasPrefix(changed, first) || changed == first {
		t.Errorf("two builds share the directory %s", changed)
	}
}
