// Command projector tails the DynamoDB stream of every tenant's command log and keeps the
// tenant's read model and activity feed up to date; `replay` rebuilds them from the log and
// `dead-letters` lists and re-drives records that could not be applied.
package main

import (
	"context"
	"io"

	"github.com/ssodir/ssodir/internal/config"
	"github.com/ssodir/ssodir/internal/process"
)

func main() {
	process.Main("projector", func(ctx context.Context, args []string, env config.Env, stdout io.Writer) error {
		return run(ctx, args, env, stdout, nil)
	})
}
