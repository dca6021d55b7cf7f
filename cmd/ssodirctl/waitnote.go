package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// waitNoteAfter is how long a wait may be silent: a longer one says what it waits for.
const waitNoteAfter = time.Second

// waitNote tells on w what a wait is for once it has lasted waitNoteAfter, and how long it
// took when it ends: no wait of ssodirctl longer than a second is silent. Call the
// function it returns when the wait ends.
func waitNote(w io.Writer, what string) (done func()) {
	start := time.Now()
	var mu sync.Mutex
	printed, over := false, false
	timer := time.AfterFunc(waitNoteAfter, func() {
		mu.Lock()
		defer mu.Unlock()
		if !over {
			printed = true
			fmt.Fprintf(w, "waiting %s…\n", what)
		}
	})
	return func() {
		timer.Stop()
		mu.Lock()
		defer mu.Unlock()
		if printed && !over {
			fmt.Fprintf(w, "waited %.0f s\n", time.Since(start).Seconds())
		}
		over = true
	}
}
