package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/ssodir/ssodir/internal/config"
)

// TestBackfillLookupsCommand runs `command-api backfill-lookups` on a tenant whose users
// already have their lookups: it reports them and writes nothing; bad arguments are an
// error before anything is read.
func TestBackfillLookupsCommand(t *testing.T) {
	env := testEnv(t)
	a := startApp(t, env)
	base := a.newTenant(t)
	a.do(t, "POST", base+"/users", map[string]any{"username": "jdoe"}).want(t, 201)
	a.do(t, "POST", base+"/groups", map[string]any{"name": "admins"}).want(t, 201)
	system, tenant := tenantOf(base)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"backfill-lookups", "--system", system, "--tenant", tenant}, config.Map(env), &out, hooks{}); err != nil {
		t.Fatal(err)
	}
	if want := system + "/" + tenant + ": 1 users and 1 groups, 0 lookup items written"; !strings.Contains(out.String(), want) {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
	for _, args := range [][]string{{"backfill-lookups"}, {"backfill-lookups", "--system", "Bad System", "--tenant", "t"}, {"backfill-lookups", "--system", "a", "--tenant", "b", "extra"}} {
		if err := run(context.Background(), args, config.Map(env), &out, hooks{}); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
