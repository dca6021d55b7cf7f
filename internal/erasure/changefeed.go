package erasure

import (
	"context"
	"slices"

	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/dynamo"
)

// eraseChangeFeed takes the person out of the tenant's change feed (the stage's shared
// `{p}_events`, docs/events.md): their own changes deleted, their membership in others'
// rewritten to an erased member (changefeed.Erase); or of a restored copy of the feed
// (Restored.EventsTable). A stage without the feed table has nothing to erase there. The
// re-application sweeps the feed by the ledger's ids instead (Reapply), never by the name,
// which a later user may hold.
func (x *Eraser) eraseChangeFeed(ctx context.Context, row dynamo.Tenant, subj *Subject) error {
	if x.feedByIDs {
		return nil // Reapply swept it by the ledger's ids
	}
	ids := make([]string, 0, len(subj.IDs))
	for id := range subj.IDs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	names := []string{subj.Username}
	for _, f := range subj.Former {
		names = append(names, f.Username)
	}
	err := changefeed.Erase(ctx, x.db, or(x.shared.Events, changefeed.TableName(x.names)), row.SystemID, row.TenantID, ids, names)
	if missing(err) {
		return nil
	}
	return err
}
