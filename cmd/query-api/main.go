// Command query-api serves ssodir's query API: paginated reads of each tenant's read tables.
// It never writes.
package main

import (
	"context"
	"io"

	"github.com/ssodir/ssodir/internal/config"
	"github.com/ssodir/ssodir/internal/process"
)

func main() {
	process.Main("query-api", func(ctx context.Context, args []string, env config.Env, stdout io.Writer) error {
		return run(ctx, args, env, stdout, hooks{})
	})
}
