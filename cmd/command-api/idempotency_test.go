package main

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/auth/authtest"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
)

// sameAnswer fails unless b repeats a: status, the write headers and the body.
func sameAnswer(t *testing.T, a, b reply) {
	t.Helper()
	if a.status != b.status || !bytes.Equal(a.body, b.body) {
		t.Errorf("answers differ:\n first %s\n again %s", a, b)
	}
	for _, h := range []string{"ETag", "Location", "X-Command-Id", "Content-Type"} {
		if a.header.Get(h) != b.header.Get(h) {
			t.Errorf("%s: first %q, again %q", h, a.header.Get(h), b.header.Get(h))
		}
	}
}

// historyCount is how many config#<version> records the tenant's write table holds.
func historyCount(t *testing.T, a *app, base string) int {
	t.Helper()
	n := 0
	for _, it := range a.items(t, a.commandsTable(base)) {
		if len(attrS(it, "sk")) > 7 && attrS(it, "sk")[:7] == "config#" {
			n++
		}
	}
	return n
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	iss := authtest.NewIssuer(t)
	env := testEnv(t)
	env["SSO_OIDC_ISSUER"], env["SSO_OIDC_AUDIENCE"] = iss.URL, authtest.Audience
	a := startApp(t, env)
	base := a.newTenant(t)
	a.do(t, "POST", base+"/users", map[string]any{"username": "jdoe"}).want(t, http.StatusCreated)
	a.do(t, "POST", base+"/groups", map[string]any{"name": "Admins"}).want(t, http.StatusCreated)

	// Every write route: the first request with a key has its effect; the same request
	// again gets the same answer and has no second effect.
	routes := []struct {
		name, method, path string
		body               any
	}{
		{"create user", "POST", "/users", map[string]any{"username": "idem", "email": "idem@example.com", "password": "a password!"}},
		{"patch user", "PATCH", "/users/jdoe", map[string]any{"first_name": "Jane"}},
		{"deactivate", "POST", "/users/jdoe/deactivate", nil},
		{"deactivate again (no change)", "POST", "/users/jdoe/deactivate", nil},
		{"activate", "POST", "/users/jdoe/activate", nil},
		{"password", "PUT", "/users/jdoe/password", map[string]any{"password": "new password"}},
		{"create group", "POST", "/groups", map[string]any{"name": "Team Idem"}},
		{"patch group", "PATCH", "/groups/admins", map[string]any{"description": "d"}},
		{"add member", "PUT", "/groups/admins/members/jdoe", nil},
		{"add member again (no change)", "PUT", "/groups/admins/members/jdoe", nil},
		{"remove member", "DELETE", "/groups/admins/members/jdoe", nil},
		{"delete group", "DELETE", "/groups/team%20idem", nil},
		{"delete user", "DELETE", "/users/idem", nil},
	}
	for _, rt := range routes {
		t.Run(rt.name+": the same key and request get the first answer again", func(t *testing.T) {
			key := "key-" + randomText(t, 9)
			first := a.do(t, rt.method, base+rt.path, rt.body, "Idempotency-Key", key)
			if first.status >= 300 {
				t.Fatalf("first answer %s", first)
			}
			records := historyCount(t, a, base)
			again := a.do(t, rt.method, base+rt.path, rt.body, "Idempotency-Key", key)
			sameAnswer(t, first, again)
			if n := historyCount(t, a, base); n != records {
				t.Errorf("the repeated request recorded %d events", n-records)
			}
		})
	}

	t.Run("a replay answers with the state the first request produced, not the current one", func(t *testing.T) {
		first := a.do(t, "PATCH", base+"/users/jdoe", map[string]any{"last_name": "First"}, "Idempotency-Key", "replay-old-state")
		a.do(t, "PATCH", base+"/users/jdoe", map[string]any{"last_name": "Second"}).want(t, http.StatusOK)
		sameAnswer(t, first, a.do(t, "PATCH", base+"/users/jdoe", map[string]any{"last_name": "First"}, "Idempotency-Key", "replay-old-state"))
	})

	t.Run("a failed request does not take its key", func(t *testing.T) {
		a.do(t, "POST", base+"/users", map[string]any{"username": "jdoe"}, "Idempotency-Key", "failed-first").
			wantProblem(t, http.StatusConflict, "username_taken")
		a.do(t, "POST", base+"/users", map[string]any{"username": "jdoe"}, "Idempotency-Key", "failed-first").
			wantProblem(t, http.StatusConflict, "username_taken")
		a.do(t, "POST", base+"/users", map[string]any{"username": "other-body"}, "Idempotency-Key", "failed-first").
			want(t, http.StatusCreated)
	})

	// The key is not looked up before the command runs: its record's condition in the
	// command's transaction, or the look-up after a failed command, refuses these.
	t.Run("a key reused for another request that would succeed is refused and has no effect", func(t *testing.T) {
		a.do(t, "POST", base+"/groups", map[string]any{"name": "reuse-first"}, "Idempotency-Key", "reused-key").want(t, http.StatusCreated)
		records := historyCount(t, a, base)
		a.do(t, "POST", base+"/groups", map[string]any{"name": "reuse-second"}, "Idempotency-Key", "reused-key").
			wantProblem(t, http.StatusUnprocessableEntity, "idempotency_key_reused")
		a.do(t, "PATCH", base+"/users/jdoe", map[string]any{"first_name": "Reused"}, "Idempotency-Key", "reused-key").
			wantProblem(t, http.StatusUnprocessableEntity, "idempotency_key_reused")
		a.do(t, "POST", base+"/users/jdoe/activate", nil, "Idempotency-Key", "reused-key").
			wantProblem(t, http.StatusUnprocessableEntity, "idempotency_key_reused")
		if n := historyCount(t, a, base); n != records {
			t.Errorf("the refused requests recorded %d events", n-records)
		}
		// Not created by the refused request: creating it now succeeds.
		a.do(t, "POST", base+"/groups", map[string]any{"name": "reuse-second"}).want(t, http.StatusCreated)
	})

	t.Run("a key reused for a request that fails is refused as reused", func(t *testing.T) {
		a.do(t, "POST", base+"/groups", map[string]any{"name": "reuse-fail"}, "Idempotency-Key", "reused-key-2").want(t, http.StatusCreated)
		a.do(t, "POST", base+"/users", map[string]any{"username": "jdoe"}, "Idempotency-Key", "reused-key-2").
			wantProblem(t, http.StatusUnprocessableEntity, "idempotency_key_reused")
	})

	t.Run("a key is scoped to the caller", func(t *testing.T) {
		a.do(t, "POST", base+"/groups", map[string]any{"name": "scoped"}, "Idempotency-Key", "scoped-key").want(t, http.StatusCreated)
		other := iss.Token(t, map[string]any{"sub": "someone-else", "scope": "directory:write", "sso_tenants": "*"})
		// Not a replay of the bootstrap caller's request: it runs, and the group exists.
		send(t, a.url, other, "POST", base+"/groups", map[string]any{"name": "scoped"}, "Idempotency-Key", "scoped-key").
			wantProblem(t, http.StatusConflict, "group_exists")
		// The other caller's own key does not collide either.
		send(t, a.url, other, "POST", base+"/groups", map[string]any{"name": "scoped-2"}, "Idempotency-Key", "scoped-key").
			want(t, http.StatusCreated)
	})

	t.Run("a key is scoped to the tenant", func(t *testing.T) {
		other := a.newTenant(t)
		first := a.do(t, "POST", base+"/groups", map[string]any{"name": "per-tenant"}, "Idempotency-Key", "tenant-key").want(t, http.StatusCreated)
		second := a.do(t, "POST", other+"/groups", map[string]any{"name": "per-tenant"}, "Idempotency-Key", "tenant-key").want(t, http.StatusCreated)
		if first.header.Get("X-Command-Id") == second.header.Get("X-Command-Id") {
			t.Error("the second tenant got the first tenant's answer")
		}
	})

	t.Run("concurrent retries with one key have one effect and all get the first answer", func(t *testing.T) {
		body := map[string]any{"username": "racer", "email": "racer@example.com"}
		replies := concurrently(t, writers, func(int) reply {
			return a.do(t, "POST", base+"/users", body, "Idempotency-Key", "racing-key")
		})
		for _, r := range replies[1:] {
			sameAnswer(t, replies[0], r)
		}
		if replies[0].status != http.StatusCreated {
			t.Errorf("answer %s", replies[0])
		}
		if e := a.record(t, base, events.KindUser, "racer", 1); e.CommandID != replies[0].header.Get("X-Command-Id") {
			t.Errorf("X-Command-Id %q is not the recorded command %q", replies[0].header.Get("X-Command-Id"), e.CommandID)
		}
	})
}

// TestIdempotencyKeyAcrossRestart checks that keys survive the process: a second run of
// the command API on the same tables answers a repeated request as the first run did.
func TestIdempotencyKeyAcrossRestart(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	first := startApp(t, env)
	base := first.newTenant(t)
	body := map[string]any{"username": "restart", "email": "restart@example.com", "first_name": "Re"}
	created := first.do(t, "POST", base+"/users", body, "Idempotency-Key", "across-restart").want(t, http.StatusCreated)
	patched := first.do(t, "PATCH", base+"/users/restart", map[string]any{"last_name": "Start"}, "Idempotency-Key", "patch-restart").want(t, http.StatusOK)
	deleted := first.do(t, "DELETE", base+"/users/restart", nil, "Idempotency-Key", "delete-restart").want(t, http.StatusNoContent)
	if err := first.stop(); err != nil {
		t.Fatalf("first run: %v", err)
	}

	second := startApp(t, env)
	sameAnswer(t, created, second.do(t, "POST", base+"/users", body, "Idempotency-Key", "across-restart"))
	sameAnswer(t, patched, second.do(t, "PATCH", base+"/users/restart", map[string]any{"last_name": "Start"}, "Idempotency-Key", "patch-restart"))
	sameAnswer(t, deleted, second.do(t, "DELETE", base+"/users/restart", nil, "Idempotency-Key", "delete-restart"))
	body["first_name"] = "Other"
	second.do(t, "POST", base+"/users", body, "Idempotency-Key", "across-restart").wantProblem(t, http.StatusUnprocessableEntity, "idempotency_key_reused")
	if n := historyCount(t, second, base); n != 3 {
		t.Errorf("%d records, want the 3 of the first run", n)
	}
}

// TestIdempotencyReplayAfterHistoryExpired: with SSO_HISTORY_RETENTION set, the history
// record a replay is rebuilt from may expire before its key does. The same request still
// gets its first answer; another request with the key gets 422, never 409.
func TestIdempotencyReplayAfterHistoryExpired(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	env["SSO_HISTORY_RETENTION"] = "1h"
	a := startApp(t, env)
	base := a.newTenant(t)
	a.do(t, "POST", base+"/users", map[string]any{"username": "hist"}).want(t, http.StatusCreated)
	expire := func(t *testing.T, version int64) {
		t.Helper()
		_, err := a.db.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{
			TableName: aws.String(a.commandsTable(base)),
			Key: map[string]types.AttributeValue{
				"id": &types.AttributeValueMemberS{Value: dynamo.AggregateID(events.KindUser, "hist")},
				"sk": &types.AttributeValueMemberS{Value: dynamo.HistorySK(version)},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	t.Run("a change whose record expired is answered as the first time", func(t *testing.T) {
		first := a.do(t, "PATCH", base+"/users/hist", map[string]any{"first_name": "Ann"}, "Idempotency-Key", "expired-change").want(t, http.StatusOK)
		a.do(t, "PATCH", base+"/users/hist", map[string]any{"first_name": "Bea"}).want(t, http.StatusOK)
		expire(t, first.etag())
		sameAnswer(t, first, a.do(t, "PATCH", base+"/users/hist", map[string]any{"first_name": "Ann"}, "Idempotency-Key", "expired-change"))
		a.do(t, "PATCH", base+"/users/hist", map[string]any{"first_name": "Cid"}, "Idempotency-Key", "expired-change").
			wantProblem(t, http.StatusUnprocessableEntity, "idempotency_key_reused")
	})
	t.Run("a request that changed nothing, whose version's record expired, is answered as the first time", func(t *testing.T) {
		a.do(t, "POST", base+"/users/hist/deactivate", nil).want(t, http.StatusOK)
		first := a.do(t, "POST", base+"/users/hist/deactivate", nil, "Idempotency-Key", "expired-noop").want(t, http.StatusOK)
		a.do(t, "PATCH", base+"/users/hist", map[string]any{"last_name": "Later"}).want(t, http.StatusOK)
		expire(t, first.etag())
		sameAnswer(t, first, a.do(t, "POST", base+"/users/hist/deactivate", nil, "Idempotency-Key", "expired-noop"))
	})
}
