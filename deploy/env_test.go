package main

import (
	"strings"
	"testing"

	"github.com/ssodir/ssodir/internal/config"
)

// Each function's environment, with the stack's references resolved and the secrets it
// names read, is a configuration its service accepts: the stack configures the binaries
// the way internal/config reads them.
func TestEveryFunctionsEnvironmentIsAValidConfiguration(t *testing.T) {
	_, _, j := synth(t)
	loaders := map[string]func(config.Env) error{
		CommandAPI:   func(e config.Env) error { _, err := config.LoadCommandAPI(e); return err },
		QueryAPI:     func(e config.Env) error { _, err := config.LoadQueryAPI(e); return err },
		Projector:    func(e config.Env) error { _, err := config.LoadProjector(e); return err },
		KeycloakSync: func(e config.Env) error { _, err := config.LoadKeycloakSync(e); return err },
	}
	values := testValues(t, j)
	for _, service := range Services {
		vars := map[string]string{}
		for k, v := range functionEnv(t, j, service) {
			s, err := values.Resolve(v)
			if err != nil {
				t.Fatalf("%s: %s: %v", service, k, err)
			}
			vars[k] = s
		}
		env := config.Map(vars)
		refs, err := config.LoadSecretRefs(env)
		if err != nil {
			t.Fatalf("%s: %v", service, err)
		}
		read := map[string]string{}
		for name := range refs.Refs {
			// Secrets Manager's generated value: 44 letters and digits.
			read[name] = strings.Repeat("Ab3", 14) + "xy"
		}
		if err := loaders[service](env.WithValues(read)); err != nil {
			t.Errorf("%s does not start with the stack's environment: %v", service, err)
		}
	}
}
