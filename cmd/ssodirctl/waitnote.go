package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/ssodir/ssodir/client"
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

// retryNote is the client's OnRetry: a wait before sending a request again (a 503 with its
// Retry-After, or a back-off after a connection error) that is longer than waitNoteAfter
// says at once what it waits for, and why; a shorter one stays silent.
func retryNote(w io.Writer, commandURL, queryURL string) func(client.Retry) {
	return func(r client.Retry) {
		if r.Wait <= waitNoteAfter {
			return
		}
		api := "the service"
		switch {
		case queryURL != "" && strings.HasPrefix(r.URL, strings.TrimRight(queryURL, "/")+"/"):
			api = "the query API"
		case commandURL != "" && strings.HasPrefix(r.URL, strings.TrimRight(commandURL, "/")+"/"):
			api = "the command API"
		}
		fmt.Fprintf(w, "waiting %s before asking %s again (attempt %d of %d), after: %v\n",
			r.Wait.Round(100*time.Millisecond), api, r.Attempt+1, r.MaxAttempts, r.Err)
	}
}
