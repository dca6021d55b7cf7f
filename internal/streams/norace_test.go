//go:build !race

package streams_test

const raceEnabled = false
