package commands_test

import (
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
)

// testFingerprints fingerprints the requests of these tests.
var testFingerprints, _ = commands.NewFingerprinter([]byte("a fingerprint key of 32 bytes..."))

// idem is an Idempotency-Key of a request whose body is body.
func idem(key, body string, status int) *commands.Idempotency {
	return &commands.Idempotency{Key: key, Request: testFingerprints.Fingerprint("POST", "/p", []byte(body)), Status: status}
}

func TestIdempotencyKeys(t *testing.T) {
	key := func() string { return "acme/t/alice/" + uuid.NewString() }
	k1, k2, k3 := key(), key(), key()
	cases := []struct {
		name  string
		given []any
		when  step
		// replay is the version the replayed record names; 0 when the request must run.
		replay int64
		err    string
	}{
		{
			// The command API looks a key up before it runs a command; the store's own check
			// is what decides when two requests with one key race.
			name:   "a key that the same request took is answered with a replay by the store",
			given:  []any{step{cmd: createUser("jdoe", ""), idem: idem(k1, "h1", 201)}},
			when:   step{cmd: createUser("john", ""), idem: idem(k1, "h1", 201)},
			replay: 1,
		},
		{
			name:  "the same key with another request is refused",
			given: []any{step{cmd: createUser("jdoe", ""), idem: idem(k2, "h1", 201)}},
			when:  step{cmd: createUser("john", ""), idem: idem(k2, "h2", 201)},
			err:   apperr.CodeIdempotencyReused,
		},
		{
			name: "a request that changed nothing still takes its key",
			given: []any{createUser("jdoe", ""), commands.SetUserActive{Username: "jdoe"},
				step{cmd: commands.SetUserActive{Username: "jdoe"}, idem: idem(k3, "h1", 200)}},
			when:   step{cmd: commands.SetUserActive{Username: "jdoe"}, idem: idem(k3, "h1", 200)},
			replay: 2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.given(tc.given...)
			before := len(w.history())
			_, err := w.exec(t.Context(), tc.when)
			if n := len(w.history()); n != before {
				t.Errorf("%d records written, want none", n-before)
			}
			var re *commands.ReplayError
			switch {
			case tc.replay != 0:
				if !errors.As(err, &re) {
					t.Fatalf("got %v, want a replay", err)
				}
				if re.Record.Version != tc.replay || !testFingerprints.Fingerprint("POST", "/p", []byte("h1")).Matches(re.Record.RequestHash) || re.Record.Status != tc.when.idem.Status || re.Record.CommandID == "" {
					t.Errorf("replayed record %+v, want version %d", re.Record, tc.replay)
				}
			default:
				if apperr.CodeOf(err) != tc.err {
					t.Fatalf("got %v, want %s", err, tc.err)
				}
			}
		})
	}
}
