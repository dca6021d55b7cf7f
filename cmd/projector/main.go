// Command projector tails the DynamoDB stream of every tenant's command log and keeps the
// tenant's read model and activity feed up to date; `replay` rebuilds them from the log and
// `dead-letters` lists and re-drives records that could not be applied.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/ssodir/ssodir/internal/config"
	"github.com/ssodir/ssodir/internal/process"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	stopProfile := process.CPUProfile(os.Getenv("SSO_CPU_PROFILE"))
	err := run(ctx, os.Args[1:], config.OS(), os.Stdout, nil)
	stop()
	stopProfile()
	process.Exit("projector", err)
}
