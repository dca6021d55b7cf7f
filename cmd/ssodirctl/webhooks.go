package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/ssodir/ssodir/client"
)

func webhooksCommand(s *settings) *cobra.Command {
	cmd := group("webhooks", "Register, inspect, replay and remove the endpoints that get --tenant's changes")
	cmd.AddCommand(webhookCreate(s), webhookList(s), webhookDeliveries(s), webhookReplay(s), webhookDelete(s), webhookRotate(s))
	return cmd
}

var webhookHeader = []string{"ID", "URL", "TYPES", "STATE", "FAILED", "NEXT ATTEMPT", "LAST ERROR"}

func webhookRow(w client.Webhook) []string {
	types := "all"
	if len(w.Types) > 0 {
		types = fmt.Sprint(w.Types)
	}
	next := ""
	if w.NextAttempt != nil {
		next = *w.NextAttempt
	}
	return []string{w.ID, w.URL, types, w.State, strconv.Itoa(w.FailedAttempts), next, w.LastError}
}

func webhookCreate(s *settings) *cobra.Command {
	var types []string
	var description string
	cmd := &cobra.Command{
		Use:   "create URL",
		Short: "Register an endpoint for --tenant's changes; its secret is shown this once",
		Long: `Register an endpoint (scope tenants:admin): every change committed from now on is POSTed to
it as a CloudEvent, signed per the Standard Webhooks specification with the secret printed
here, this once (whsec_…). Only https URLs to public addresses, unless the services run
with SSO_WEBHOOKS_ALLOW_PRIVATE=true.`,
		Example: `  ssodirctl webhooks create https://hr.example.com/ssodir --system acme --tenant eu
  ssodirctl webhooks create https://siem.example.com/in --type user.created --type user.deleted -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tc, p, err := s.tenantPrinter(cmd.Context())
			if err != nil {
				return err
			}
			w, err := tc.CreateWebhook(cmd.Context(), client.NewWebhook{URL: args[0], Types: types, Description: description})
			if err != nil {
				return err
			}
			if p.format == "table" {
				fmt.Fprintf(s.io.err, "the secret is shown this once; keep it where the endpoint verifies signatures\n")
				return p.one(w, append(webhookHeader, "SECRET"), append(webhookRow(*w), w.Secret))
			}
			return p.one(w, nil, nil)
		},
	}
	cmd.Flags().StringArrayVar(&types, "type", nil, "an event name to deliver (e.g. user.created); repeat it; all when none")
	cmd.Flags().StringVar(&description, "description", "", "what the endpoint is for")
	return cmd
}

func webhookList(s *settings) *cobra.Command {
	return tenantListCommand(s, "List --tenant's endpoints and their delivery state (never their secrets)",
		"  ssodirctl webhooks list --system acme --tenant eu",
		(*client.TenantClient).ListWebhooks, webhookHeader, webhookRow)
}

func webhookDeliveries(s *settings) *cobra.Command {
	var after string
	var limit int
	cmd := &cobra.Command{
		Use:     "deliveries ID",
		Short:   "List an endpoint's recent delivery attempts, newest first",
		Example: "  ssodirctl webhooks deliveries 3f0c… --limit 20",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tc, p, err := s.tenantPrinter(cmd.Context())
			if err != nil {
				return err
			}
			page, err := tc.WebhookDeliveries(cmd.Context(), args[0], after, limit)
			if err != nil {
				return err
			}
			rows := make([][]string, 0, len(page.Items))
			for _, d := range page.Items {
				status, next := "", ""
				if d.ResponseStatus != 0 {
					status = strconv.Itoa(d.ResponseStatus)
				}
				if d.NextAttempt != nil {
					next = *d.NextAttempt
				}
				rows = append(rows, []string{d.At, d.EventID, d.Type, d.Subject, strconv.Itoa(d.Attempt), d.Status, status, d.Error, next})
			}
			if page.NextCursor != "" && p.format == "table" {
				fmt.Fprintf(s.io.err, "more: --after %s\n", page.NextCursor)
			}
			return p.list(page, []string{"AT", "EVENT", "TYPE", "SUBJECT", "ATTEMPT", "STATUS", "RESPONSE", "ERROR", "NEXT ATTEMPT"}, rows)
		},
	}
	cmd.Flags().StringVar(&after, "after", "", "the next page's cursor, from the previous page")
	cmd.Flags().IntVar(&limit, "limit", 0, "attempts per page (1-200; default 50)")
	return cmd
}

func webhookReplay(s *settings) *cobra.Command {
	var after string
	cmd := &cobra.Command{
		Use:   "replay ID",
		Short: "Re-enable an endpoint and deliver again from a change feed cursor",
		Long: `Re-enable an endpoint (a disabled one too) and have it deliver every change after --after,
a cursor of the change feed (ssodirctl events tail prints one). Without --after it goes on
from where it stands.`,
		Example: "  ssodirctl webhooks replay 3f0c… --after eyJ2Ijo…",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tc, p, err := s.tenantPrinter(cmd.Context())
			if err != nil {
				return err
			}
			w, err := tc.ReplayWebhook(cmd.Context(), args[0], after)
			if err != nil {
				return err
			}
			return p.one(w, webhookHeader, webhookRow(*w))
		},
	}
	cmd.Flags().StringVar(&after, "after", "", "a change feed cursor to deliver after")
	return cmd
}

func webhookDelete(s *settings) *cobra.Command {
	return &cobra.Command{
		Use:   "delete ID",
		Short: "Remove an endpoint of --tenant",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tc, err := s.tenantClient(cmd.Context())
			if err != nil {
				return err
			}
			if err := tc.DeleteWebhook(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(s.io.err, "webhook %s deleted\n", args[0])
			return nil
		},
	}
}

func webhookRotate(s *settings) *cobra.Command {
	return &cobra.Command{
		Use:   "rotate-secret ID",
		Short: "Give an endpoint a new secret, shown this once; the old one signs too for 24 hours",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tc, p, err := s.tenantPrinter(cmd.Context())
			if err != nil {
				return err
			}
			w, err := tc.RotateWebhookSecret(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if p.format == "table" {
				fmt.Fprintf(s.io.err, "the new secret is shown this once; both sign for 24 hours\n")
				return p.one(w, append(webhookHeader, "SECRET"), append(webhookRow(*w), w.Secret))
			}
			return p.one(w, nil, nil)
		},
	}
}
