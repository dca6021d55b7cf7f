package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/ssodir/ssodir/internal/config"
)

func TestHelpPrintsUsage(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"--help", "-h"} {
		var out bytes.Buffer
		if err := run(context.Background(), []string{arg}, config.Map(nil), &out, hooks{}); err != nil {
			t.Errorf("run %s: %v, want nil", arg, err)
		}
		if !strings.HasPrefix(out.String(), "usage: command-api") || !strings.Contains(out.String(), "SSO_COMMAND_ADDR") {
			t.Errorf("run %s printed %q", arg, out.String())
		}
	}
}

func TestBadConfigurationIsAnError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"an unknown log level", nil, map[string]string{"SSO_LOG_LEVEL": "loud"}, []string{"SSO_LOG_LEVEL", "loud"}},
		{"no secret key", nil, map[string]string{"SSO_SECRET_KEY": ""}, []string{"SSO_SECRET_KEY"}},
		{"a secret key of the wrong size", nil, map[string]string{"SSO_SECRET_KEY": "c2hvcnQ="}, []string{"SSO_SECRET_KEY"}},
		{"no way to authenticate", nil, map[string]string{"SSO_BOOTSTRAP_TOKEN": ""}, []string{"SSO_BOOTSTRAP_TOKEN"}},
		{"a bad listen address", nil, map[string]string{"SSO_COMMAND_ADDR": "nowhere"}, []string{"SSO_COMMAND_ADDR"}},
		{"a bad history retention", nil, map[string]string{"SSO_HISTORY_RETENTION": "forever"}, []string{"SSO_HISTORY_RETENTION"}},
		{"every problem at once", nil, map[string]string{"SSO_LOG_LEVEL": "loud", "SSO_TABLE_PREFIX": "no spaces"},
			[]string{"SSO_LOG_LEVEL", "SSO_TABLE_PREFIX"}},
		{"an unknown argument", []string{"serve"}, nil, []string{"serve"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := testEnv(t)
			for k, v := range tc.env {
				env[k] = v
			}
			logs := &syncBuffer{}
			err := run(t.Context(), tc.args, config.Map(env), io.Discard, hooks{
				onListen: func(string) { t.Error("it listened") },
				logs:     logs,
			})
			if err == nil {
				t.Fatal("run returned nil")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
}
