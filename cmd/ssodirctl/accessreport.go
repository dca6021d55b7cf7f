package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/ssodir/ssodir/client"
)

// accessReportCommand is `access-report --from --to [--format csv]`: the report streams
// to stdout as the query API sends it (docs/history.md, "The access report").
func accessReportCommand(s *settings) *cobra.Command {
	var from, to, format string
	cmd := &cobra.Command{
		Use:   "access-report --from TIME --to TIME [--format csv]",
		Short: "Every membership interval that overlaps [from, to), who made each change, and the users' active periods",
		Long: `Prints the access report of [--from, --to) as JSON (default) or CSV, streamed as it is read.
TIME is RFC 3339 (2026-03-31T23:59:59Z) or a UTC day (2026-03-31, its midnight).
CSV cells a spreadsheet would read as formulas begin with ' (see docs/history.md).
A report cut short fails with a non-zero exit; the file is then incomplete.`,
		Example: `  ssodirctl access-report --from 2026-01-01 --to 2026-04-01 --format csv > q1-access.csv
  ssodirctl access-report --from 2026-03-31T00:00:00Z --to 2026-03-31T12:00:00Z`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := reportTime("--from", from)
			if err != nil {
				return err
			}
			t, err := reportTime("--to", to)
			if err != nil {
				return err
			}
			if format != client.ReportJSON && format != client.ReportCSV {
				return usagef("--format is json or csv")
			}
			tc, err := s.tenantClient(cmd.Context())
			if err != nil {
				return err
			}
			body, err := tc.AccessReport(cmd.Context(), f, t, format)
			if err != nil {
				return err
			}
			defer body.Close()
			if _, err := io.Copy(cmd.OutOrStdout(), body); err != nil {
				return fmt.Errorf("access report cut short (the output is incomplete): %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the first instant of the range (RFC 3339 or YYYY-MM-DD)")
	cmd.Flags().StringVar(&to, "to", "", "the end of the range, excluded (RFC 3339 or YYYY-MM-DD)")
	cmd.Flags().StringVar(&format, "format", client.ReportJSON, "json or csv")
	return cmd
}

// reportTime reads an RFC 3339 instant or a UTC day.
func reportTime(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, usagef("%s is required", flag)
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Time{}, usagef("%s must be RFC 3339 (2026-03-31T23:59:59Z) or a day (2026-03-31)", flag)
}
