package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/ssodir/ssodir/client"
)

func tenantsCommand(s *settings) *cobra.Command {
	cmd := group("tenants", "Provision tenants and read their settings")
	cmd.AddCommand(tenantList(s), tenantCreate(s), tenantGet(s), tenantSetKeycloak(s))
	return cmd
}

func tenantCreate(s *settings) *cobra.Command {
	var kc client.KeycloakSettings
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "create TENANT",
		Short: "Provision a tenant in --system, and wait until it is active",
		Long: `Provision a tenant in --system (scope tenants:admin). Doing it again with the same settings
changes nothing. The API may answer before the tenant's tables are ready (202,
provisioning); the command then waits, up to --wait, until the tenant is active.

With --keycloak-url, the tenant's realm is kept in step by keycloak-sync; the client
secret comes from SSODIR_KEYCLOAK_CLIENT_SECRET, never from a flag.`,
		Example: `  ssodirctl tenants create eu --system acme
  SSODIR_KEYCLOAK_CLIENT_SECRET=... ssodirctl tenants create eu --system acme \
      --keycloak-url https://sso.example.com --keycloak-realm eu --keycloak-client-id ssodir`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, p, err := s.systemClient(cmd.Context())
			if err != nil {
				return err
			}
			in := client.NewTenant{TenantID: args[0]}
			if kc.URL != "" || kc.Realm != "" || kc.ClientID != "" {
				if err := completeKeycloak(s, &kc); err != nil {
					return err
				}
				in.Keycloak = &kc
			}
			res, err := c.CreateTenant(cmd.Context(), s.system, in)
			if err != nil {
				return err
			}
			t := &res.Tenant
			if res.Status == http.StatusAccepted || t.Status != client.TenantActive {
				fmt.Fprintf(s.io.err, "tenant %s/%s is provisioning; waiting until it is active\n", s.system, args[0])
				ctx, cancel := contextWithTimeout(cmd, wait)
				defer cancel()
				if t, err = c.WaitTenantActive(ctx, s.system, args[0], time.Second); err != nil {
					return err
				}
			}
			return p.one(t, tenantHeader, tenantRow(*t))
		},
	}
	keycloakFlags(cmd, &kc)
	f := cmd.Flags()
	f.DurationVar(&wait, "wait", 5*time.Minute, "how long to wait for a provisioning tenant to become active")
	return cmd
}

func tenantList(s *settings) *cobra.Command {
	var max int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the tenants of --system by id, with their status and settings (never the Keycloak secret)",
		Long: `List the tenants of --system by tenant id, with their status and Keycloak settings (never
the secret). Tenants still provisioning are listed too. A token limited to some tenants
lists only those.`,
		Example: `  ssodirctl tenants list --system acme
  ssodirctl tenants list --system acme -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, p, err := s.systemClient(cmd.Context())
			if err != nil {
				return err
			}
			items, rows := []client.Tenant{}, [][]string{}
			for t, err := range c.Tenants(cmd.Context(), s.system, 500) {
				if err != nil {
					return err
				}
				items, rows = append(items, t), append(rows, tenantRow(t))
				if max > 0 && len(items) == max {
					break
				}
			}
			return p.list(items, tenantHeader, rows)
		},
	}
	cmd.Flags().IntVar(&max, "max", 0, "show at most this many (default all)")
	return cmd
}

func tenantGet(s *settings) *cobra.Command {
	return &cobra.Command{
		Use:     "get TENANT",
		Short:   "Show a tenant's status and settings (never the Keycloak secret)",
		Example: "  ssodirctl tenants get eu --system acme -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, p, err := s.systemClient(cmd.Context())
			if err != nil {
				return err
			}
			t, err := c.Tenant(s.system, args[0]).Get(cmd.Context())
			if err != nil {
				return err
			}
			return p.one(t, tenantHeader, tenantRow(*t))
		},
	}
}

func keycloakFlags(cmd *cobra.Command, kc *client.KeycloakSettings) {
	f := cmd.Flags()
	f.StringVar(&kc.URL, "keycloak-url", "", "Keycloak base URL")
	f.StringVar(&kc.Realm, "keycloak-realm", "", "Keycloak realm")
	f.StringVar(&kc.ClientID, "keycloak-client-id", "", "client id (with the client credentials grant) for the Admin API")
	f.StringVar(&kc.OnDelete, "keycloak-on-delete", "", "delete (default) or disable a deleted user's Keycloak user")
}

// completeKeycloak adds the secret from the environment and checks the settings.
func completeKeycloak(s *settings, kc *client.KeycloakSettings) error {
	kc.ClientSecret = s.env.Value("SSODIR_KEYCLOAK_CLIENT_SECRET")
	if kc.URL == "" || kc.Realm == "" || kc.ClientID == "" || kc.ClientSecret == "" {
		return usagef("Keycloak settings need --keycloak-url, --keycloak-realm, --keycloak-client-id and SSODIR_KEYCLOAK_CLIENT_SECRET")
	}
	return nil
}

func tenantSetKeycloak(s *settings) *cobra.Command {
	var kc client.KeycloakSettings
	cmd := &cobra.Command{
		Use:   "set-keycloak TENANT",
		Short: "Replace a tenant's Keycloak settings (the secret from SSODIR_KEYCLOAK_CLIENT_SECRET)",
		Example: `  SSODIR_KEYCLOAK_CLIENT_SECRET=... ssodirctl tenants set-keycloak eu --system acme \
      --keycloak-url https://sso.example.com --keycloak-realm eu --keycloak-client-id ssodir`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if s.system == "" {
				return usagef("which system? set --system (or SSODIR_SYSTEM)")
			}
			if err := completeKeycloak(s, &kc); err != nil {
				return err
			}
			c, err := s.client(cmd.Context())
			if err != nil {
				return err
			}
			p, err := s.printer()
			if err != nil {
				return err
			}
			t, err := c.Tenant(s.system, args[0]).SetKeycloak(cmd.Context(), kc)
			if err != nil {
				return err
			}
			return p.one(t, tenantHeader, tenantRow(*t))
		},
	}
	keycloakFlags(cmd, &kc)
	return cmd
}
