// Command command-api serves ssodir's command API: it validates commands and appends them
// to each tenant's command log, and provisions tenants.
package main

import (
	"context"
	"io"

	"github.com/ssodir/ssodir/internal/config"
	"github.com/ssodir/ssodir/internal/process"
)

func main() {
	process.Main("command-api", func(ctx context.Context, args []string, env config.Env, stdout io.Writer) error {
		return run(ctx, args, env, stdout, hooks{})
	})
}
