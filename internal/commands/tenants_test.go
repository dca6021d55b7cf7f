package commands_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/secrets"
)

// tenantWorld is the tenant side: the real tenant store on the shared tables.
type tenantWorld struct {
	t     *testing.T
	db    *dynamodb.Client
	names dynamo.Names
	store *dynamo.TenantStore
	box   *secrets.Box
}

func newTenantWorld(t *testing.T) *tenantWorld {
	t.Helper()
	local := dynamotest.Current(t)
	names := sharedTables(t, local)
	db := local.DynamoDB()
	box, err := secrets.NewLocal(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	return &tenantWorld{t: t, db: db, names: names, store: dynamo.NewTenantStore(db, names), box: box}
}

func (w *tenantWorld) exec(ctx context.Context, cmd any) (commands.TenantRecord, bool, error) {
	switch c := cmd.(type) {
	case commands.ProvisionTenant:
		return commands.NewProvisionTenantHandler(w.store, w.box, time.Now).Handle(ctx, c)
	case commands.UpdateKeycloak:
		rec, err := commands.NewUpdateKeycloakHandler(w.store, w.box, time.Now).Handle(ctx, c)
		return rec, false, err
	case commands.TenantRecord:
		// A row as an interrupted provisioning leaves it: written, tables not yet made.
		return c, false, w.store.PutTenant(ctx, c, 0)
	}
	w.t.Fatalf("no handler for %T", cmd)
	return commands.TenantRecord{}, false, nil
}

// row is the tenant's raw Config item.
func (w *tenantWorld) row(t *testing.T, system, tenant string) map[string]types.AttributeValue {
	t.Helper()
	out, err := w.db.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName: aws.String(w.names.Config()), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"system_id": &types.AttributeValueMemberS{Value: system}, "tenant_id": &types.AttributeValueMemberS{Value: tenant},
		},
	})
	if err != nil || out.Item == nil {
		t.Fatalf("tenant row %s/%s: %v", system, tenant, err)
	}
	return out.Item
}

func (w *tenantWorld) tablesExist(t *testing.T, system, tenant string) {
	t.Helper()
	for _, name := range []string{w.names.Commands(system, tenant), w.names.Users(system, tenant, 0), w.names.Activities(system, tenant, 0)} {
		out, err := w.db.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil || out.Table.TableStatus != types.TableStatusActive {
			t.Errorf("table %s is not ready: %v", name, err)
		}
	}
}

func TestTenantCommands(t *testing.T) {
	kc := func(secret string) *commands.KeycloakSettings {
		return &commands.KeycloakSettings{URL: "https://kc.example.com/", Realm: "acme", ClientID: "ssodir", ClientSecret: secret}
	}
	provision := func(tenant string, k *commands.KeycloakSettings) commands.ProvisionTenant {
		return commands.ProvisionTenant{System: "acme", Tenant: tenant, Keycloak: k}
	}
	cases := []struct {
		name  string
		given func(tenant string) []any
		when  func(tenant string) any
		// created is what the handler answers; err the expected error code.
		created bool
		err     string
		fields  []string
		also    func(t *testing.T, w *tenantWorld, tenant string, rec commands.TenantRecord)
	}{
		{
			name:    "a new tenant is provisioned: created, active, with its tables",
			when:    func(id string) any { return provision(id, kc("s3cr3t")) },
			created: true,
			also: func(t *testing.T, w *tenantWorld, id string, rec commands.TenantRecord) {
				if rec.Status != commands.TenantActive || rec.Keycloak == nil || rec.Keycloak.URL != "https://kc.example.com" || rec.Keycloak.OnDelete != "delete" {
					t.Errorf("record %+v", rec)
				}
				w.tablesExist(t, "acme", id)
				if got := s(w.row(t, "acme", id), "status"); got != commands.TenantActive {
					t.Errorf("stored status %q", got)
				}
			},
		},
		{
			name:    "the client secret is stored encrypted, never in clear",
			when:    func(id string) any { return provision(id, kc("plain-client-secret")) },
			created: true,
			also: func(t *testing.T, w *tenantWorld, id string, _ commands.TenantRecord) {
				row := w.row(t, "acme", id)
				if p, ok := dynamotest.FindPlaintext(row, "plain-client-secret"); ok {
					t.Errorf("the row holds the secret in clear in %s", p)
				}
				pt, err := w.box.Decrypt(t.Context(), s(row, "client_secret"), "client_secret:acme/"+id)
				if err != nil || string(pt) != "plain-client-secret" {
					t.Errorf("client_secret decrypts to %q (%v)", pt, err)
				}
			},
		},
		{
			name:  "provisioning again with the same settings answers the tenant, not created",
			given: func(id string) []any { return []any{provision(id, kc("s3cr3t"))} },
			when:  func(id string) any { return provision(id, kc("s3cr3t")) },
		},
		{
			name:  "a tenant without Keycloak settings provisioned again without them is the same",
			given: func(id string) []any { return []any{provision(id, nil)} },
			when:  func(id string) any { return provision(id, nil) },
		},
		{
			name:  "provisioning again with another secret conflicts",
			given: func(id string) []any { return []any{provision(id, kc("s3cr3t"))} },
			when:  func(id string) any { return provision(id, kc("other")) },
			err:   apperr.CodeTenantExists,
		},
		{
			name:  "provisioning again with another realm conflicts",
			given: func(id string) []any { return []any{provision(id, kc("s3cr3t"))} },
			when: func(id string) any {
				k := kc("s3cr3t")
				k.Realm = "other"
				return provision(id, k)
			},
			err: apperr.CodeTenantExists,
		},
		{
			name:  "provisioning again with Keycloak settings where there were none conflicts",
			given: func(id string) []any { return []any{provision(id, nil)} },
			when:  func(id string) any { return provision(id, kc("s3cr3t")) },
			err:   apperr.CodeTenantExists,
		},
		{
			name: "an interrupted provisioning is finished by the next one",
			given: func(id string) []any {
				return []any{commands.TenantRecord{System: "acme", ID: id, Status: commands.TenantProvisioning}}
			},
			when: func(id string) any { return provision(id, nil) },
			also: func(t *testing.T, w *tenantWorld, id string, rec commands.TenantRecord) {
				w.tablesExist(t, "acme", id)
				if got := s(w.row(t, "acme", id), "status"); got != commands.TenantActive || rec.Status != commands.TenantActive {
					t.Errorf("status %q, answered %q", got, rec.Status)
				}
			},
		},
		{
			name: "invalid ids and Keycloak settings are reported by field",
			when: func(string) any {
				return commands.ProvisionTenant{System: "Acme!", Tenant: "-bad", Keycloak: &commands.KeycloakSettings{
					URL: "https://user:pw@kc.example.com", Realm: "a/b", ClientID: "", ClientSecret: strings.Repeat("s", 1025), OnDelete: "archive",
				}}
			},
			err: apperr.CodeValidationFailed,
			fields: []string{"keycloak.client_id", "keycloak.client_secret", "keycloak.on_delete", "keycloak.realm",
				"keycloak.url", "system", "tenant_id"},
		},
		{
			name:  "new Keycloak settings replace the old, with the secret encrypted",
			given: func(id string) []any { return []any{provision(id, kc("s3cr3t"))} },
			when: func(id string) any {
				return commands.UpdateKeycloak{System: "acme", Tenant: id, Keycloak: commands.KeycloakSettings{
					URL: "https://sso.example.com", Realm: "r2", ClientID: "c2", ClientSecret: "new-plain-secret", OnDelete: "disable",
				}}
			},
			also: func(t *testing.T, w *tenantWorld, id string, rec commands.TenantRecord) {
				row := w.row(t, "acme", id)
				if s(row, "keycloak_url") != "https://sso.example.com" || s(row, "keycloak_realm") != "r2" ||
					s(row, "client_id") != "c2" || s(row, "on_delete") != "disable" || s(row, "status") != commands.TenantActive {
					t.Errorf("row %v", row)
				}
				if _, ok := dynamotest.FindPlaintext(row, "new-plain-secret"); ok {
					t.Error("the row holds the new secret in clear")
				}
				if pt, err := w.box.Decrypt(t.Context(), s(row, "client_secret"), "client_secret:acme/"+id); err != nil || string(pt) != "new-plain-secret" {
					t.Errorf("client_secret decrypts to %q (%v)", pt, err)
				}
				if rec.RowVersion != 3 {
					t.Errorf("row version %d, want 3 (created, activated, updated)", rec.RowVersion)
				}
			},
		},
		{
			name: "Keycloak settings of an unknown tenant are not found",
			when: func(id string) any {
				return commands.UpdateKeycloak{System: "acme", Tenant: id, Keycloak: *kc("s")}
			},
			err: apperr.CodeNotFound,
		},
		{
			name:  "invalid Keycloak settings are refused",
			given: func(id string) []any { return []any{provision(id, kc("s3cr3t"))} },
			when: func(id string) any {
				return commands.UpdateKeycloak{System: "acme", Tenant: id, Keycloak: commands.KeycloakSettings{URL: "kc.example.com", Realm: "r", ClientID: "c", ClientSecret: "s"}}
			},
			err:    apperr.CodeValidationFailed,
			fields: []string{"keycloak.url"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newTenantWorld(t)
			id := dynamotest.UniqueName("t")
			if tc.given != nil {
				for _, g := range tc.given(id) {
					if _, _, err := w.exec(t.Context(), g); err != nil {
						t.Fatalf("given %+v: %v", g, err)
					}
				}
			}
			rec, created, err := w.exec(t.Context(), tc.when(id))
			if tc.err != "" {
				if apperr.CodeOf(err) != tc.err {
					t.Fatalf("got %v, want %s", err, tc.err)
				}
				if len(tc.fields) > 0 {
					e, _ := apperr.As(err)
					var fields []string
					for _, f := range e.Fields {
						fields = append(fields, f.Field)
					}
					slices.Sort(fields)
					if !slices.Equal(fields, tc.fields) {
						t.Errorf("fields at fault %v, want %v", fields, tc.fields)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("when: %v", err)
			}
			if created != tc.created {
				t.Errorf("created %v, want %v", created, tc.created)
			}
			if tc.also != nil {
				tc.also(t, w, id, rec)
			}
		})
	}
}
