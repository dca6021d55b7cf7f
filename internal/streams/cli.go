package streams

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

// DeadLetterCommand runs the `dead-letters list|redrive [--system S [--tenant T]]`
// subcommand that every consumer binary offers, re-driving through apply.
func DeadLetterCommand(ctx context.Context, args []string, out io.Writer, dl *DeadLetters, apply func(context.Context, Record) error) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "redrive") {
		return errors.New("dead-letters: say list or redrive (see --help)")
	}
	fs := flag.NewFlagSet("dead-letters "+args[0], flag.ContinueOnError)
	fs.SetOutput(out)
	var filter DeadLetterFilter
	fs.StringVar(&filter.System, "system", "", "only this system")
	fs.StringVar(&filter.Tenant, "tenant", "", "only this tenant (with --system)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 || (filter.Tenant != "" && filter.System == "") {
		return fmt.Errorf("dead-letters %s: usage: [--system S [--tenant T]]", args[0])
	}
	if args[0] == "list" {
		letters, err := dl.List(ctx, filter)
		if err != nil {
			return err
		}
		for _, d := range letters {
			reason := d.Reason
			if d.BlockedBehind != "" {
				reason = "waiting behind " + d.BlockedBehind
			}
			fmt.Fprintf(out, "%s/%s\t%s\tseq %s\tattempts %d\t%s\t%s\n", d.System, d.Tenant, d.Aggregate,
				d.SequenceNumber, d.Attempts, d.At.UTC().Format(time.RFC3339), reason)
		}
		fmt.Fprintf(out, "%d dead letter(s)\n", len(letters))
		return nil
	}
	res, err := dl.Redrive(ctx, filter, apply)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "re-driven: %d applied, %d aggregate(s) still failing\n", res.Applied, len(res.Failed))
	for _, f := range res.Failed {
		fmt.Fprintf(out, "  %s/%s %s seq %s: %s\n", f.System, f.Tenant, f.Aggregate, f.SequenceNumber, f.Reason)
	}
	if len(res.Failed) > 0 {
		return fmt.Errorf("%d aggregate(s) still failing", len(res.Failed))
	}
	return nil
}
