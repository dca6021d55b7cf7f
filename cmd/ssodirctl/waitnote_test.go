package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/servicetest"
)

// syncBuffer is a bytes.Buffer that a note's timer may write while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// A wait that lasts says what it waits for, and when it is over; a wait that ends at once
// says nothing.
func TestWaitNote(t *testing.T) {
	t.Parallel()
	var quick syncBuffer
	waitNote(&quick, "for nothing")()
	var long syncBuffer
	done := waitNote(&long, "until something is done")
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(long.String(), "waiting until something is done…"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no note after 30 s: %q", long.String())
		}
	}
	done()
	if !strings.Contains(long.String(), "\nwaited ") {
		t.Errorf("the end of the wait is not told: %q", long.String())
	}
	done()
	if strings.Count(long.String(), "waited") != 1 || quick.String() != "" {
		t.Errorf("notes: %q and %q", long.String(), quick.String())
	}
}

// users erase waits for the erasure's two passes (at least SSO_ERASURE_SETTLE, 10 s or
// more, apart) and says so while it waits.
func TestEraseSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	s := servicetest.Start(t)
	c := newCtl(t, s)
	c.ok("tenants", "create", "eu")
	c.ok("users", "create", "gone", "--email", "gone@example.com")
	r := c.run("", "users", "erase", "gone", "--reason", "test", "--timeout", "5s")
	if !strings.Contains(r.out, "accepted") || !strings.Contains(r.errOut, "waiting until erasure ") || !strings.Contains(r.errOut, "--wait=false returns at once") {
		t.Fatalf("users erase printed %+v", r)
	}
}
