// Command keycloak-sync keeps every tenant's Keycloak realm in step with ssodir's
// directory: event-driven from the command log's streams, plus a periodic full reconcile;
// `reconcile` runs one full reconcile from the command line.
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
	process.Exit("keycloak-sync", err)
}
