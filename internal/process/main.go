package process

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/ssodir/ssodir/internal/config"
)

// Run is a service's whole life after start-up: it serves until ctx is done. A binary's
// run has this shape so that tests start the same code in-process, with their own
// arguments, environment and output.
type Run func(ctx context.Context, args []string, env config.Env, stdout io.Writer) error

// Main is the whole of a service binary's main: SIGTERM or an interrupt cancel the
// context, secrets given by reference are read (ResolveSecrets), SSO_CPU_PROFILE (read by config) may profile the run, and the process exits
// once, here, with run's outcome.
func Main(service string, run Run) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	env, err := ResolveSecrets(ctx, Role(service, os.Args[1:]), config.OS())
	if err != nil {
		stop()
		Exit(service, err)
	}
	stopProfile := CPUProfile(config.CPUProfile(env))
	err = run(ctx, os.Args[1:], env, os.Stdout)
	stop()
	stopProfile()
	Exit(service, err)
}
