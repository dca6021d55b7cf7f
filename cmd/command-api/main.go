// Command command-api serves ssodir's command API: it validates commands and appends them
// to each tenant's command log, and provisions tenants.
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
	process.Exit("command-api", err)
}
