package dynamo

import (
	"context"
	"sync"
	"time"

	"github.com/ssodir/ssodir/internal/streams"
)

// TenantStreams is the streams.Source of every tenant's write table, read from
// `{p}_Config`, so that tenants provisioned while a consumer runs are picked up.
//
// A poll reads one item, the tenant list's version (see Tenants.ListVersion), and pages
// through the tenant rows only when it moved, or every FullRefresh in any case; otherwise
// it answers from its cache. With N tenants a poll costs 1 read instead of a Scan of N
// rows.
type TenantStreams struct {
	tenants *Tenants
	// FullRefresh bounds how long a change that did not move the version (a row edited
	// by hand) goes unseen. Default 5 minutes.
	FullRefresh time.Duration

	mu      sync.Mutex
	version int64
	readAt  time.Time
	cached  []streams.Stream
	loaded  bool
}

var _ streams.Source = (*TenantStreams)(nil)

// NewTenantStreams lists the command-log streams of the tenants in `{p}_Config`.
func NewTenantStreams(t *Tenants) *TenantStreams {
	return &TenantStreams{tenants: t, FullRefresh: 5 * time.Minute}
}

// Streams are the write tables of tenants whose tables are ready, with their stream ARN
// where provisioning noted it.
func (s *TenantStreams) Streams(ctx context.Context) ([]streams.Stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.tenants.ListVersion(ctx)
	if err != nil {
		return nil, err
	}
	if s.loaded && v == s.version && time.Since(s.readAt) < s.FullRefresh {
		return s.cached, nil
	}
	readAt := time.Now()
	rows, err := s.tenants.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]streams.Stream, 0, len(rows))
	for _, r := range rows {
		if r.Status != TenantActive || r.CommandsTable == "" {
			continue
		}
		out = append(out, streams.Stream{System: r.SystemID, Tenant: r.TenantID, Table: r.CommandsTable, StreamARN: r.CommandsStreamARN})
	}
	s.version, s.readAt, s.cached, s.loaded = v, readAt, out, true
	return out, nil
}
