package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ssodir/ssodir/internal/config"
	"github.com/ssodir/ssodir/internal/servicetest"
)

func TestMain(m *testing.M) { servicetest.Main(m) }

// ctl runs one ssodirctl command line in-process against the services, with the
// environment a user would set, and returns its exit code and output.
type ctl struct {
	t   *testing.T
	env map[string]string
}

func newCtl(t *testing.T, s *servicetest.Services) *ctl {
	return &ctl{t: t, env: map[string]string{
		"SSODIR_COMMAND_URL": s.CommandURL, "SSODIR_QUERY_URL": s.QueryURL, "SSODIR_TOKEN": servicetest.Token,
		"SSODIR_SYSTEM": "acme", "SSODIR_TENANT": "eu",
	}}
}

type ran struct {
	code        int
	out, errOut string
}

func (c *ctl) run(stdin string, args ...string) ran {
	c.t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, stdio{in: strings.NewReader(stdin), out: &out, err: &errOut}, config.Map(c.env))
	return ran{code: code, out: out.String(), errOut: errOut.String()}
}

// ok runs a command that must succeed.
func (c *ctl) ok(args ...string) string {
	c.t.Helper()
	r := c.run("", args...)
	if r.code != 0 {
		c.t.Fatalf("ssodirctl %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.out, r.errOut)
	}
	return r.out
}

// fails runs a command that must exit with code.
func (c *ctl) fails(code int, args ...string) ran {
	c.t.Helper()
	r := c.run("", args...)
	if r.code != code {
		c.t.Fatalf("ssodirctl %s: exit %d, want %d\n%s%s", strings.Join(args, " "), r.code, code, r.out, r.errOut)
	}
	return r
}

func decodeJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return v
}
