package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/client"
)

// readBack is the --wait flag of every write: the query API shows a write a moment after
// the command API accepted it (the projector writes the views), so a script's next
// command could miss it. With --wait (the default) a write reads what it wrote back from
// the query API with X-Min-Version, which waits there (up to 5 s a read) until the view
// holds the version written; a view that does not get there is reported on stderr, and
// the command still succeeds, as its write did.
type readBack struct{ wait bool }

const waitHelp = "after writing, wait until the query API shows what was written, so that the next command sees it (--wait=false: return at once)"

func (r *readBack) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&r.wait, "wait", true, waitHelp)
}

// user waits until username's view holds version (a deleted user's: its tombstone).
func (r readBack) user(ctx context.Context, s *settings, t *client.TenantClient, username string, version int64) {
	if !r.wait || version < 1 {
		return
	}
	done := waitNote(s.io.err, fmt.Sprintf("until the query API shows user %s at version %d (--wait=false: do not wait)", username, version))
	_, err := t.GetUser(ctx, username, client.MinVersion(version))
	done()
	r.report(s, "user "+username, version, err)
}

// group waits until the group's view holds version; a group's view reaches the version of
// a membership change only once the memberships it changed are there too.
func (r readBack) group(ctx context.Context, s *settings, t *client.TenantClient, name string, version int64) {
	if !r.wait || version < 1 {
		return
	}
	done := waitNote(s.io.err, fmt.Sprintf("until the query API shows group %s at version %d (--wait=false: do not wait)", name, version))
	_, err := t.GetGroup(ctx, name, client.MinVersion(version))
	done()
	r.report(s, "group "+name, version, err)
}

// groups waits for many groups' views (an import's membership changes), one after another.
func (r readBack) groups(ctx context.Context, s *settings, t *client.TenantClient, versions map[string]int64) {
	if !r.wait || len(versions) == 0 {
		return
	}
	done := waitNote(s.io.err, fmt.Sprintf("until the query API shows the memberships of the %d groups written (--wait=false: do not wait)", len(versions)))
	errs := map[string]error{}
	for name, v := range versions {
		_, err := t.GetGroup(ctx, name, client.MinVersion(v))
		errs[name] = err
	}
	done()
	for name, err := range errs {
		r.report(s, "group "+name, versions[name], err)
	}
}

// report tells of a write the query API does not show yet. A 404 means the view reached
// the version of a delete.
func (r readBack) report(s *settings, what string, version int64, err error) {
	if err == nil || client.IsNotFound(err) {
		return
	}
	fmt.Fprintf(s.io.err, "warning: %s was written (version %d), but the query API does not show it yet: %v\n", what, version, err)
}

// users waits for many users' views, a few at a time.
func (r readBack) users(ctx context.Context, s *settings, t *client.TenantClient, versions map[string]int64, concurrency int) {
	if !r.wait || len(versions) == 0 {
		return
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	var (
		mu      sync.Mutex
		missing []string
		last    error
	)
	for u, v := range versions {
		g.Go(func() error {
			if _, err := t.GetUser(gctx, u, client.MinVersion(v)); err != nil && !client.IsNotFound(err) {
				mu.Lock()
				missing, last = append(missing, u), err
				mu.Unlock()
			}
			return nil
		})
	}
	done := waitNote(s.io.err, fmt.Sprintf("until the query API shows the %d users written (--wait=false: do not wait)", len(versions)))
	_ = g.Wait()
	done()
	if len(missing) > 0 {
		fmt.Fprintf(s.io.err, "warning: %d of the %d users written are not shown by the query API yet (%s first): %v\n",
			len(missing), len(versions), missing[0], last)
	}
}
