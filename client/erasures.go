package client

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Erasure is an erasure's status (GET /erasures/{id}); it never shows who was erased.
type Erasure struct {
	ErasureID   string            `json:"erasure_id"`
	Status      string            `json:"status"`
	RequestedAt string            `json:"requested_at"`
	CompletedAt *string           `json:"completed_at"`
	Places      map[string]string `json:"places"`
}

// Done reports whether every trace is gone.
func (e Erasure) Done() bool { return e.Status == "done" }

// EraseUser erases a person (scope directory:erase): the answer names the erasure, which
// goes on in the background (WaitErasure). reason is kept in the ledger and must not name
// the person.
func (t *TenantClient) EraseUser(ctx context.Context, username, reason string, opts ...Option) (*Erasure, error) {
	return t.EraseUserWith(ctx, username, EraseRequest{Reason: reason}, opts...)
}

// EraseRequest is the body of an erasure.
type EraseRequest struct {
	// Reason is kept in the ledger and must not name the person.
	Reason string `json:"reason"`
	// AllIncarnations erases the earlier incarnations under the name too (they may have
	// been someone else); by default only the one the name resolves to (the live user,
	// or the latest deleted one).
	AllIncarnations bool `json:"all_incarnations,omitempty"`
}

// EraseUserWith is EraseUser with every field of the request.
func (t *TenantClient) EraseUserWith(ctx context.Context, username string, req EraseRequest, opts ...Option) (*Erasure, error) {
	var out Erasure
	_, err := t.c.call(ctx, t.c.command, http.MethodPost, t.path("/users/"+seg(username)+"/erase"),
		req, &out, opts)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// GetErasure reads an erasure's status from the query API.
func (t *TenantClient) GetErasure(ctx context.Context, erasureID string) (*Erasure, error) {
	var out Erasure
	if _, err := t.c.call(ctx, t.c.query, http.MethodGet, t.path("/erasures/"+seg(erasureID)), nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// WaitErasure polls the erasure every interval until it is done or ctx ends.
func (t *TenantClient) WaitErasure(ctx context.Context, erasureID string, interval time.Duration) (*Erasure, error) {
	for {
		e, err := t.GetErasure(ctx, erasureID)
		if err != nil {
			return nil, err
		}
		if e.Done() {
			return e, nil
		}
		select {
		case <-ctx.Done():
			return e, fmt.Errorf("erasure %s still %s: %w", erasureID, e.Status, ctx.Err())
		case <-time.After(interval):
		}
	}
}
