package dynamo

import (
	"context"

	"github.com/ssodir/ssodir/internal/streams"
)

// TenantStreams is the streams.Source of every tenant's write table, read from
// `{p}_Config`, so that tenants provisioned while a consumer runs are picked up.
type TenantStreams struct{ tenants *Tenants }

var _ streams.Source = (*TenantStreams)(nil)

// NewTenantStreams lists the command-log streams of the tenants in `{p}_Config`.
func NewTenantStreams(t *Tenants) *TenantStreams { return &TenantStreams{tenants: t} }

// Streams are the write tables of tenants whose tables are ready.
func (s *TenantStreams) Streams(ctx context.Context) ([]streams.Stream, error) {
	rows, err := s.tenants.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]streams.Stream, 0, len(rows))
	for _, r := range rows {
		if r.Status != TenantActive || r.CommandsTable == "" {
			continue
		}
		out = append(out, streams.Stream{System: r.SystemID, Tenant: r.TenantID, Table: r.CommandsTable})
	}
	return out, nil
}
