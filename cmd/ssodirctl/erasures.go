package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/events"
)

// erasuresCommand is `ssodirctl erasures reapply`: the erasure ledger re-applied to
// restored tables (docs/erasure.md, "Backups"). Unlike the other commands it works on
// DynamoDB directly, with the operator's AWS credentials and the services' environment
// (SSO_TABLE_PREFIX, AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB): a restore is an operator's
// act, and no API serves it. `projector erasures reapply` is the same.
func erasuresCommand(s *settings) *cobra.Command {
	cmd := group("erasures", "Erasures of persons (erase one with `users erase`)")
	var r erasure.Restored
	reapply := &cobra.Command{
		Use:   "reapply --system S --tenant T",
		Short: "Erase again, from restored tables, everyone the tenant's erasure ledger has erased",
		Example: `  ssodirctl erasures reapply --system acme --tenant eu \
    --commands-table mbcsso_prod_acme_eu_user_commands_restored \
    --users-table mbcsso_prod_acme_eu_users_restored \
    --activities-table mbcsso_prod_acme_eu_activities_restored \
    --idempotency-table mbcsso_prod_idempotency_restored \
    --events-table mbcsso_prod_events_restored`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			system, tenant, cfg, clients, err := s.adminClients(cmd.Context())
			if err != nil {
				return err
			}
			names := dynamo.Names{Prefix: cfg.TablePrefix}
			x := erasure.NewEraser(clients.DB, names, dynamo.NewTenants(clients.DB, names), events.NewRegistry(), erasure.Options{})
			res, err := x.Reapply(cmd.Context(), system, tenant, r)
			if err != nil {
				return err
			}
			fmt.Fprintf(s.io.out, "%d erasures in the ledger of %s/%s; %d erased users found again and erased\n", res.Erasures, system, tenant, res.Users)
			return nil
		},
	}
	reapply.Flags().StringVar(&r.CommandsTable, "commands-table", "", "the restored write table (default: the tenant's)")
	reapply.Flags().StringVar(&r.UsersTable, "users-table", "", "the restored read table (default: the tenant's)")
	reapply.Flags().StringVar(&r.ActivitiesTable, "activities-table", "", "the restored activity table (default: the tenant's)")
	reapply.Flags().StringVar(&r.IdempotencyTable, "idempotency-table", "", "a restored copy of the stage's Idempotency-Key table (default: the stage's)")
	reapply.Flags().StringVar(&r.DeadLettersTable, "dead-letters-table", "", "a restored copy of the stage's dead-letter table (default: the stage's)")
	reapply.Flags().StringVar(&r.SyncStatusTable, "sync-status-table", "", "a restored copy of the stage's Keycloak sync status table (default: the stage's)")
	reapply.Flags().StringVar(&r.EventsTable, "events-table", "", "a restored copy of the stage's change feed table, {p}_events (default: the stage's)")
	cmd.AddCommand(reapply, erasuresList(s), erasuresResume(s), erasuresIndexMembers(s))
	return cmd
}
