// Package events defines ssodir's domain events: their stable wire names, schema version and
// payloads, and a registry that decodes a recorded event back into its typed payload.
//
// Every accepted command records exactly one event in the aggregate's immutable
// `config#<version>` record. The payload of every event carries the full state of the
// aggregate after the command, so a reader that sees the records of one aggregate in any
// order can still converge on the latest state by keeping the highest version.
//
// This package imports only the standard library: storage and transport encode records.
package events

import (
	"encoding/json"
	"fmt"
	"time"
)

// SchemaVersion is the version of the payload schemas defined here. A decoder accepts
// records of this version or older.
const SchemaVersion = 1

// Type is an event's stable wire name.
type Type string

// AggregateKind is the kind of aggregate an event belongs to.
type AggregateKind string

const (
	KindUser  AggregateKind = "user"
	KindGroup AggregateKind = "group"
	// KindErasure is not an aggregate: it is the kind an Idempotency-Key record of an
	// erase request names (its key is the erasure id, never the user).
	KindErasure AggregateKind = "erasure"
)

// Payload is the typed body of an event.
type Payload interface {
	EventType() Type
}

// Change is the old and new value of one field; a nil Old or New means absent.
type Change struct {
	Old any `json:"old"`
	New any `json:"new"`
}

// Envelope is one recorded event with its metadata.
type Envelope struct {
	EventID       string        `json:"event_id"`
	Type          Type          `json:"type"`
	SchemaVersion int           `json:"schema_version"`
	Kind          AggregateKind `json:"kind"`
	// Key identifies the aggregate within its kind: the username, or the lower-cased
	// group name.
	Key           string    `json:"key"`
	Version       int64     `json:"version"`
	Actor         string    `json:"actor"`
	CommandID     string    `json:"command_id"`
	CorrelationID string    `json:"correlation_id"`
	OccurredAt    time.Time `json:"occurred_at"`
	// Changes is the field-level change set of the command; it never holds a password.
	Changes map[string]Change `json:"changes,omitempty"`
	Payload Payload           `json:"-"`
}

// Entity is the activity-feed name of the aggregate, e.g. "user:jdoe".
func (e Envelope) Entity() string { return string(e.Kind) + ":" + e.Key }

// Registry maps wire names to payload types.
type Registry struct {
	factories map[Type]func() Payload
}

// NewRegistry is a registry of every event this package defines.
func NewRegistry() *Registry {
	r := &Registry{factories: map[Type]func() Payload{}}
	for _, f := range []func() Payload{
		func() Payload { return &UserCreated{} },
		func() Payload { return &UserUpdated{} },
		func() Payload { return &UserPasswordChanged{} },
		func() Payload { return &UserDeactivated{} },
		func() Payload { return &UserActivated{} },
		func() Payload { return &UserDeleted{} },
		func() Payload { return &UserErased{} },
		func() Payload { return &UserRenamed{} },
		func() Payload { return &GroupCreated{} },
		func() Payload { return &GroupUpdated{} },
		func() Payload { return &GroupDeleted{} },
		func() Payload { return &GroupRenamed{} },
		func() Payload { return &GroupMemberAdded{} },
		func() Payload { return &GroupMemberRemoved{} },
		func() Payload { return &GroupMembersChanged{} },
		func() Payload { return &GroupMemberExpirySet{} },
	} {
		r.factories[f().EventType()] = f
	}
	return r
}

// Types lists the registered wire names.
func (r *Registry) Types() []Type {
	out := make([]Type, 0, len(r.factories))
	for t := range r.factories {
		out = append(out, t)
	}
	return out
}

// Known reports whether t is a registered wire name.
func (r *Registry) Known(t Type) bool { _, ok := r.factories[t]; return ok }

// Decode turns a recorded payload of type t and schema version v into its typed value.
func (r *Registry) Decode(t Type, v int, data []byte) (Payload, error) {
	f, ok := r.factories[t]
	if !ok {
		return nil, fmt.Errorf("unknown event type %q", t)
	}
	if v < 1 || v > SchemaVersion {
		return nil, fmt.Errorf("event %s: unsupported schema version %d", t, v)
	}
	p := f()
	if err := json.Unmarshal(data, p); err != nil {
		return nil, fmt.Errorf("decode %s payload: %w", t, err)
	}
	return p, nil
}

// Encode is the wire form of a payload.
func Encode(p Payload) ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode %s payload: %w", p.EventType(), err)
	}
	return b, nil
}
