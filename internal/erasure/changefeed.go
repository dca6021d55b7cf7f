package erasure

import (
	"context"
	"slices"
	"time"

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
	// A name is the person's from the erased incarnation's coming to it (every time with
	// AllIncarnations) on, and a former name's while they held it: an earlier incarnation's
	// changes, and a later holder's of a former name, name them too, and stay.
	names := []string{subj.Username}
	held := heldNames{}
	held.add(subj.Username, subj.Since, time.Time{})
	for _, f := range subj.Former {
		names = append(names, f.Username)
		held.add(f.Username, f.From, f.Until)
	}
	err := changefeed.Erase(ctx, x.db, or(x.shared.Events, changefeed.TableName(x.names)), row.SystemID, row.TenantID, ids, names, held.named)
	if missing(err) {
		return nil
	}
	return err
}
