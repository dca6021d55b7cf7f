// Command query-api serves ssodir's query API: paginated reads of each tenant's read tables.
// It never writes.
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
	err := run(ctx, os.Args[1:], config.OS(), os.Stdout, hooks{})
	stop()
	stopProfile()
	process.Exit("query-api", err)
}
