package streams

import (
	"context"
	"slices"
	"sync"
)

// Stream is one DynamoDB stream to follow, with the labels its records carry.
type Stream struct {
	System string
	Tenant string
	// Table is the table whose stream this is.
	Table string
	// StreamARN may be left empty: the Subscriber then finds the table's current stream
	// with ListStreams (the one with the newest label).
	StreamARN string
}

// Source tells the Subscriber which streams to follow. It is polled every
// Config.SourceInterval, so streams appearing later (a tenant created while the process
// runs) are picked up, and streams that disappear are let go (leases released). A failed
// poll keeps the previous set.
type Source interface {
	Streams(ctx context.Context) ([]Stream, error)
}

// StaticSource is a Source holding a list that can be changed while it is in use.
type StaticSource struct {
	mu      sync.Mutex
	streams []Stream
}

// NewStaticSource returns a source of these streams.
func NewStaticSource(streams ...Stream) *StaticSource {
	return &StaticSource{streams: slices.Clone(streams)}
}

// Set replaces the list.
func (s *StaticSource) Set(streams ...Stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streams = slices.Clone(streams)
}

// Add appends to the list.
func (s *StaticSource) Add(streams ...Stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streams = append(s.streams, streams...)
}

// Streams implements Source.
func (s *StaticSource) Streams(context.Context) ([]Stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.streams), nil
}

var _ Source = (*StaticSource)(nil)
