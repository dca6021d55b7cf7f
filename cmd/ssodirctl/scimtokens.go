package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ssodir/ssodir/client"
)

func scimTokensCommand(s *settings) *cobra.Command {
	cmd := group("scim-tokens", "Make, list and revoke the tokens identity providers use for SCIM")
	cmd.AddCommand(scimTokenCreate(s), scimTokenList(s), scimTokenRevoke(s))
	return cmd
}

var scimTokenHeader = []string{"ID", "NAME", "CREATED", "EXPIRES", "CREATED BY"}

func scimTokenRow(t client.ScimToken) []string {
	expires := "never"
	if t.ExpiresAt != nil {
		expires = *t.ExpiresAt
	}
	return []string{t.ID, t.Name, t.CreatedAt, expires, t.CreatedBy}
}

func scimTokenCreate(s *settings) *cobra.Command {
	var expiresIn time.Duration
	var expiresAt string
	var printToken bool
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Make a SCIM token for --tenant; the token is shown this once",
		Long: `Make a SCIM token for --tenant (scope tenants:admin): the secret an identity provider keeps
for its SCIM connection (Okta's "API Token", Entra's "Secret Token"). It is valid only on
the tenant's SCIM endpoints, /scim/v2/{system}/{tenant}. It is printed this once: ssodir
keeps only an HMAC of it. Without --expires-in or --expires-at it does not expire.`,
		Example: `  ssodirctl scim-tokens create okta-prod --system acme --tenant eu
  ssodirctl scim-tokens create entra --expires-in 8760h -o json
  SCIM_TOKEN=$(ssodirctl scim-tokens create okta-test --print-token)`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := client.NewScimToken{Name: args[0]}
			switch {
			case expiresIn != 0 && expiresAt != "":
				return usagef("give --expires-in or --expires-at, not both")
			case expiresIn != 0:
				at := time.Now().Add(expiresIn).UTC()
				in.ExpiresAt = &at
			case expiresAt != "":
				at, err := time.Parse(time.RFC3339, expiresAt)
				if err != nil {
					return usagef("--expires-at: %v (RFC 3339, e.g. 2027-01-31T00:00:00Z)", err)
				}
				in.ExpiresAt = &at
			}
			tc, p, err := s.tenantPrinter(cmd.Context())
			if err != nil {
				return err
			}
			t, err := tc.CreateScimToken(cmd.Context(), in)
			if err != nil {
				return err
			}
			if printToken {
				fmt.Fprintln(s.io.out, t.Token)
				return nil
			}
			if p.format == "table" {
				fmt.Fprintf(s.io.err, "the token is shown this once; keep it in the identity provider's SCIM settings\n")
				return p.one(t, append(scimTokenHeader, "TOKEN"), append(scimTokenRow(*t), t.Token))
			}
			return p.one(t, nil, nil)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&expiresIn, "expires-in", 0, "the token expires this long from now")
	f.StringVar(&expiresAt, "expires-at", "", "the token expires at this time (RFC 3339)")
	f.BoolVar(&printToken, "print-token", false, "print only the token (for a script: SCIM_TOKEN=$(ssodirctl scim-tokens create NAME --print-token))")
	return cmd
}

func scimTokenList(s *settings) *cobra.Command {
	return tenantListCommand(s, "List --tenant's SCIM tokens (never their secrets)",
		"  ssodirctl scim-tokens list --system acme --tenant eu",
		(*client.TenantClient).ListScimTokens, scimTokenHeader, scimTokenRow)
}

func scimTokenRevoke(s *settings) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID|NAME",
		Short: "Revoke a SCIM token of --tenant at once, by its id or its name",
		Long: `Revoke a SCIM token of --tenant at once. It is named by its id (scim-tokens list shows
it) or by its name when exactly one of the tenant's tokens has that name.`,
		Example: "  ssodirctl scim-tokens revoke 3f0c…  --system acme --tenant eu\n  ssodirctl scim-tokens revoke okta-prod",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tc, err := s.tenantClient(cmd.Context())
			if err != nil {
				return err
			}
			id, err := scimTokenID(cmd.Context(), tc, args[0])
			if err != nil {
				return err
			}
			if err := tc.RevokeScimToken(cmd.Context(), id); err != nil {
				return err
			}
			if id != args[0] {
				fmt.Fprintf(s.io.out, "SCIM token %s (%s) revoked\n", args[0], id)
			} else {
				fmt.Fprintf(s.io.out, "SCIM token %s revoked\n", id)
			}
			return nil
		},
	}
}

// scimTokenID is the id of the token named by idOrName: the id itself when a token has it,
// else the id of the one token with that name. No match is left to the revoke (its 404).
func scimTokenID(ctx context.Context, tc *client.TenantClient, idOrName string) (string, error) {
	items, err := tc.ListScimTokens(ctx)
	if err != nil {
		return "", err
	}
	var named []string
	for _, t := range items {
		if t.ID == idOrName {
			return t.ID, nil
		}
		if t.Name == idOrName {
			named = append(named, t.ID)
		}
	}
	switch len(named) {
	case 0:
		return idOrName, nil
	case 1:
		return named[0], nil
	default:
		return "", usagef("%d SCIM tokens are named %q (%s): revoke one by its id", len(named), idOrName, strings.Join(named, ", "))
	}
}
