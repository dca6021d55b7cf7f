package streams

import "time"

// SetParkClock replaces the clock the park timer checks itself against until the test ends.
func SetParkClock(t interface{ Cleanup(func()) }, clock func() time.Time) {
	parkClock = clock
	t.Cleanup(func() { parkClock = time.Now })
}
