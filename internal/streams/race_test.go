//go:build race

package streams_test

// raceEnabled: the race detector allows 8,128 live goroutines per process.
const raceEnabled = true
