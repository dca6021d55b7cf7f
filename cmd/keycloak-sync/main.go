// Command keycloak-sync keeps every tenant's Keycloak realm in step with ssodir's
// directory: event-driven from the command log's streams, plus a periodic full reconcile;
// `reconcile` runs one full reconcile from the command line.
package main

import (
	"context"
	"io"

	"github.com/ssodir/ssodir/internal/config"
	"github.com/ssodir/ssodir/internal/process"
)

func main() {
	process.Main("keycloak-sync", func(ctx context.Context, args []string, env config.Env, stdout io.Writer) error {
		return run(ctx, args, env, stdout, nil)
	})
}
