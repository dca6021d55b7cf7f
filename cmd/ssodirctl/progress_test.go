//go:build linux

package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/ssodir/ssodir/internal/config"
	"github.com/ssodir/ssodir/internal/servicetest"
)

// openPTY opens a pseudo-terminal: what the import writes to tty is read from the
// returned master, as a terminal emulator would.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	ioctl := func(req uintptr, arg unsafe.Pointer) {
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), req, uintptr(arg)); errno != 0 {
			t.Fatalf("ioctl %#x on the pty master: %v", req, errno)
		}
	}
	var unlock int32
	ioctl(syscall.TIOCSPTLCK, unsafe.Pointer(&unlock))
	var n uint32
	ioctl(syscall.TIOCGPTN, unsafe.Pointer(&n))
	tty, err = os.OpenFile("/dev/pts/"+strconv.FormatUint(uint64(n), 10), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the pty: %v", err)
	}
	t.Cleanup(func() { master.Close(); tty.Close() })
	return master, tty
}

// importTo runs import users of file with stderr on errOut and returns what the reader
// side of errOut received.
func importTo(t *testing.T, c *ctl, file string, errOut, reader *os.File) string {
	t.Helper()
	got := make(chan string)
	go func() {
		var buf bytes.Buffer
		_, _ = io.Copy(&buf, reader) // a pty master ends with EIO once the tty is closed
		got <- buf.String()
	}()
	var out bytes.Buffer
	code := run(context.Background(), []string{"import", "users", file}, stdio{in: strings.NewReader(""), out: &out, err: errOut},
		config.Map(c.env))
	errOut.Close()
	s := <-got
	if code != 0 || !strings.Contains(out.String(), "users: 3 created") {
		t.Fatalf("import: exit %d\n%s%s", code, out.String(), s)
	}
	return s
}

func TestImportShowsABarOnATerminalAndLinesOnAPipe(t *testing.T) {
	t.Parallel()
	c := newCtl(t, servicetest.Start(t))
	c.ok("tenants", "create", "eu")

	master, tty := openPTY(t)
	if !isTerminal(tty) {
		t.Fatal("a pty is not taken for a terminal")
	}
	onTTY := importTo(t, c, writeFile(t, "a.csv", "username\nbar1\nbar2\nbar3\n"), tty, master)
	// progressbar draws "users 100% |████| (3/3, n users/s)", redrawn in place with \r.
	for _, want := range []string{"100%", "█", "(3/3", "users/s"} {
		if !strings.Contains(onTTY, want) {
			t.Errorf("the terminal shows no %q: %q", want, onTTY)
		}
	}
	if strings.Contains(onTTY, "users: 3/3") {
		t.Errorf("the terminal shows plain progress lines: %q", onTTY)
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if isTerminal(w) {
		t.Fatal("a pipe is taken for a terminal")
	}
	onPipe := importTo(t, c, writeFile(t, "b.csv", "username\npipe1\npipe2\npipe3\n"), w, r)
	if !strings.Contains(onPipe, "users: 3/3 (") {
		t.Errorf("the pipe shows no progress line: %q", onPipe)
	}
	for _, bar := range []string{"\r", "%", "█"} {
		if strings.Contains(onPipe, bar) {
			t.Errorf("the pipe shows a bar (%q): %q", bar, onPipe)
		}
	}
}
