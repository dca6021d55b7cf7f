package deadletters

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/ssodir/ssodir/internal/streams"
)

// Command runs the `dead-letters list|redrive|backfill [--system S [--tenant T]]`
// subcommand that every consumer binary offers, re-driving through apply. backfill writes
// the markers of dead letters stored by a version without them.
func Command(ctx context.Context, args []string, out io.Writer, dl *Store, apply func(context.Context, streams.Record) error) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "redrive" && args[0] != "backfill") {
		return errors.New("dead-letters: say list, redrive or backfill (see --help)")
	}
	fs := flag.NewFlagSet("dead-letters "+args[0], flag.ContinueOnError)
	fs.SetOutput(out)
	var filter Filter
	fs.StringVar(&filter.System, "system", "", "only this system")
	fs.StringVar(&filter.Tenant, "tenant", "", "only this tenant (with --system)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 || (filter.Tenant != "" && filter.System == "") {
		return fmt.Errorf("dead-letters %s: usage: [--system S [--tenant T]]", args[0])
	}
	if args[0] == "backfill" {
		n, err := dl.Backfill(ctx)
		fmt.Fprintf(out, "%d aggregate(s) marked\n", n)
		return err
	}
	if args[0] == "list" {
		n := 0
		err := dl.Each(ctx, filter, func(d Letter) error {
			n++
			reason := d.Reason
			if d.BlockedBehind != "" {
				reason = "waiting behind " + d.BlockedBehind
			}
			fmt.Fprintf(out, "%s/%s\t%s\tseq %s\tattempts %d\t%s\t%s\n", d.System, d.Tenant, d.Aggregate,
				d.SequenceNumber, d.Attempts, d.At.UTC().Format(time.RFC3339), reason)
			return nil
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%d dead letter(s)\n", n)
		return nil
	}
	// An operator's re-drive goes through everything, however long it takes.
	res, err := dl.Redrive(ctx, filter, apply, 0)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "re-driven: %d applied, %d aggregate(s) still failing\n", res.Applied, res.FailedCount)
	for _, f := range res.Failed {
		fmt.Fprintf(out, "  %s/%s %s seq %s: %s\n", f.System, f.Tenant, f.Aggregate, f.SequenceNumber, f.Reason)
	}
	if res.FailedCount > 0 {
		return fmt.Errorf("%d aggregate(s) still failing", res.FailedCount)
	}
	return nil
}
