package dynamo

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// StreamMappings are Lambda mode's event source mappings of a tenant's command-log stream
// to the consumer functions (internal/mappings).
type StreamMappings interface {
	// Ensure makes the stream's mappings, keeping those that exist.
	Ensure(ctx context.Context, streamARN string) error
	// Remove deletes the mappings of the given streams (those of one incarnation of a
	// tenant's table: never matched by the table's name, which a newer incarnation shares).
	Remove(ctx context.Context, streamARNs ...string) error
}

// WithMappings has provisioning map each new tenant's stream to the consumer functions,
// and DropTenant remove the mappings before the table (Lambda mode).
func (s *TenantStore) WithMappings(m StreamMappings) *TenantStore {
	s.mappings = m
	return s
}

// ensureMappings maps the tenant's current stream; a table re-created has a new stream
// and gets new mappings. It runs on every Finish, so a provisioning resumed after a crash
// between the tables and the mappings makes them.
func (s *TenantStore) ensureMappings(ctx context.Context, system, tenant string) error {
	if s.mappings == nil {
		return nil
	}
	table := s.names.Commands(system, tenant)
	out, err := s.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("describe table %s: %w", table, translate(err))
	}
	arn := aws.ToString(out.Table.LatestStreamArn)
	if arn == "" {
		return fmt.Errorf("table %s has no stream", table)
	}
	return s.mappings.Ensure(ctx, arn)
}

// removeMappings deletes the mappings of the stream an incarnation of the tenant noted in
// its row (none noted: its provisioning made none, for mappings follow the note).
func (s *TenantStore) removeMappings(ctx context.Context, streamARN string) error {
	if s.mappings == nil || streamARN == "" {
		return nil
	}
	return s.mappings.Remove(ctx, streamARN)
}

// ParseCommands reads the system and tenant from a tenant's write table name (the
// inverse of Commands); ok is false for any other name. Ids hold no '_'.
func (n Names) ParseCommands(table string) (system, tenant string, ok bool) {
	rest, found := strings.CutPrefix(table, n.Prefix+"_")
	if !found {
		return "", "", false
	}
	rest, found = strings.CutSuffix(rest, "_user_commands")
	if !found {
		return "", "", false
	}
	system, tenant, found = strings.Cut(rest, "_")
	if !found || system == "" || tenant == "" || strings.Contains(tenant, "_") {
		return "", "", false
	}
	return system, tenant, true
}
