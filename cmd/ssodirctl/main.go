// Command ssodirctl administers an ssodir directory through its command and query APIs:
// users, groups, memberships, activity and tenants, and onboarding by import (from CSV or
// JSON Lines files, or from an existing Keycloak realm) and export. See README.md, "Admin
// tools", and `ssodirctl --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/ssodir/ssodir/internal/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}, config.OS())
	stop()
	os.Exit(code)
}
