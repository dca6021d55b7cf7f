package deadletters

import "context"

// Rewrite passes each dead letter of one tenant to fn, which may change it: drop deletes
// it, changed stores it again as fn left it (its key unchanged). An erasure uses it
// (internal/erasure): the dead letters of an erased user go, and those naming them as a
// member are rewritten as their history records are. It returns how many it dropped and
// rewrote. The markers of the aggregates it dropped from are brought up to date.
func (s *Store) Rewrite(ctx context.Context, system, tenant string, fn func(*Letter) (drop, changed bool, err error)) (dropped, rewritten int, err error) {
	touched := map[Aggregate]bool{}
	var dropErr error
	err = s.Each(ctx, Filter{System: system, Tenant: tenant}, func(l Letter) error {
		drop, changed, err := fn(&l)
		if err != nil {
			return err
		}
		switch {
		case drop:
			if err := s.deleteEntry(ctx, l); err != nil {
				return err
			}
			touched[Aggregate{l.System, l.Tenant, l.Table, l.Aggregate}] = true
			dropped++
		case changed:
			if err := s.putEntry(ctx, l); err != nil {
				return err
			}
			rewritten++
		}
		return nil
	})
	for a := range touched {
		if err := s.refreshMarker(ctx, a); err != nil && dropErr == nil {
			dropErr = err
		}
	}
	if err != nil {
		return dropped, rewritten, err
	}
	return dropped, rewritten, dropErr
}
