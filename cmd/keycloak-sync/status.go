package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/dynamo"
)

// tenantStatus is one line of `keycloak-sync status`.
type tenantStatus struct {
	Tenant          string `json:"tenant"`
	LastReconcileAt string `json:"last_reconcile_at,omitempty"`
	LastSuccessAt   string `json:"last_success_at,omitempty"`
	LastError       string `json:"last_error,omitempty"`
	DriftFound      int    `json:"drift_found"`
	DriftRepaired   int    `json:"drift_repaired"`
	Stale           int    `json:"stale"`
	Conflicts       int    `json:"conflicts"`
	Parked          bool   `json:"parked"`
	ParkedSince     string `json:"parked_since,omitempty"`
	ParkedReason    string `json:"parked_reason,omitempty"`
	DeadLetters     int    `json:"dead_letters"`
	// UsernameChanges: whether the realm lets renames through (allowed, refused, unknown).
	UsernameChanges string `json:"username_changes,omitempty"`
}

// processName names this process in the status table (who saw a realm fail).
func processName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

// status prints, per tenant with Keycloak settings, what keycloak-sync last did: the
// reconcile's time, result and drift, whether the tenant is parked and why, and how many
// of its records wait as dead letters. Records held by a park are not stored; the
// ssodir_stream_parked_records metric of the process holding them counts them.
func (a *app) status(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stdout)
	system := fs.String("system", "", "only this system")
	tenant := fs.String("tenant", "", "only this tenant (with --system)")
	output := fs.String("o", "table", "output format: table or json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 || (*tenant != "" && *system == "") || (*output != "table" && *output != "json") {
		return errors.New("status: usage: status [--system S [--tenant T]] [-o table|json]")
	}
	rows, err := a.reconciler.Tenants(ctx, *system, *tenant)
	if err != nil {
		return err
	}
	// Before the first service start the status table may not exist yet: nothing recorded.
	recorded, err := a.statuses.List(ctx)
	if err != nil && !dynamo.IsTableMissing(err) {
		return err
	}
	byTenant := map[string]dynamo.SyncStatus{}
	for _, r := range recorded {
		byTenant[r.SystemID+"/"+r.TenantID] = r
	}
	counts, err := deadletters.New(a.clients.DB, a.deadLetterTable(), consumer).Counts(ctx,
		deadletters.Filter{System: *system, Tenant: *tenant})
	if err != nil && !dynamo.IsTableMissing(err) {
		return err
	}
	dead := map[string]int{}
	for t, n := range counts {
		dead[t.System+"/"+t.Tenant] = n
	}
	var out []tenantStatus
	for _, row := range rows {
		key := row.SystemID + "/" + row.TenantID
		r := byTenant[key]
		out = append(out, tenantStatus{Tenant: key, LastReconcileAt: r.LastReconcileAt, LastSuccessAt: r.LastSuccessAt,
			LastError: r.LastError, DriftFound: r.DriftFound, DriftRepaired: r.DriftRepaired, Stale: r.Stale,
			Conflicts: r.Conflicts, Parked: r.ParkedNow(time.Now()), ParkedSince: r.ParkedSince, ParkedReason: r.ParkedReason,
			DeadLetters: dead[key], UsernameChanges: r.UsernameChanges})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tenant < out[j].Tenant })
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if out == nil {
			out = []tenantStatus{}
		}
		return enc.Encode(out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tLAST RECONCILE\tRESULT\tDRIFT FOUND\tREPAIRED\tSTALE\tCONFLICTS\tPARKED\tDEAD LETTERS\tRENAMES")
	now := time.Now()
	for _, s := range out {
		result := "ok"
		switch {
		case s.LastReconcileAt == "":
			result = "-"
		case s.LastError != "":
			result = "failed: " + shorten(s.LastError, 60)
		}
		parked := "no"
		if s.Parked {
			parked = "since " + ago(s.ParkedSince, now) + ": " + shorten(s.ParkedReason, 60)
		}
		renames := s.UsernameChanges
		switch renames {
		case "":
			renames = "-"
		case "refused":
			renames = "refused: turn on Edit username"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%d\t%s\n", s.Tenant, ago(s.LastReconcileAt, now), result,
			s.DriftFound, s.DriftRepaired, s.Stale, s.Conflicts, parked, s.DeadLetters, renames)
	}
	return tw.Flush()
}

// ago shows a recorded time as its age ("3m ago"), or "never".
func ago(at string, now time.Time) string {
	t, err := dynamo.ParseTime(at)
	if at == "" || err != nil {
		return "never"
	}
	return now.Sub(t).Round(time.Second).String() + " ago"
}

func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
