package events

import (
	"encoding/json"
	"errors"
	"fmt"
)

// A record that lists a group's members (group.renamed, group.deleted) may list more than
// one DynamoDB item holds (400 KB): its member list is split over continuation parts,
// items written in the record's own transaction (docs/storage.md, "Record parts"). Each
// part's payload is a payload of the record's type that holds members only; the record
// holds the rest of the payload and the first members. Whoever reads the record reads its
// parts with it and joins them (JoinMembers) before using the payload.
const (
	// PartBytes is the most the encoded payload of a record, or of one of its parts, holds:
	// with the item's other attributes it stays well below the 400 KB item limit.
	PartBytes = 300_000
	// MemberListBytes is the most a record and its parts hold together: their transaction
	// (at most 4 MB) keeps room for its other items.
	MemberListBytes = 3_000_000
)

// ErrMemberListTooLong is SplitMembers' answer for a member list beyond MemberListBytes.
var ErrMemberListTooLong = errors.New("the member list passes the most one record holds")

// SplitMembers splits p's member list so that p and every part encode within PartBytes:
// head is p with the members that fit in the record (p itself, unchanged, when everything
// fits), parts are payloads of p's type holding the rest, in order. A list that passes
// MemberListBytes is ErrMemberListTooLong. Payloads that list no members are never split.
func SplitMembers(p Payload) (head Payload, parts []Payload, err error) {
	whole, err := Encode(p)
	if err != nil {
		return nil, nil, err
	}
	if len(whole) <= PartBytes {
		return p, nil, nil
	}
	if len(whole) > MemberListBytes {
		return nil, nil, ErrMemberListTooLong
	}
	var sizes []int
	var members func(p Payload, from, to int) Payload
	switch x := p.(type) {
	case *GroupRenamed:
		sizes, err = memberSizes(x.Members)
		members = func(q Payload, from, to int) Payload {
			c := *q.(*GroupRenamed)
			c.Members = x.Members[from:to:to]
			return &c
		}
	case *GroupDeleted:
		sizes, err = memberSizes(x.Members)
		members = func(q Payload, from, to int) Payload {
			c := *q.(*GroupDeleted)
			c.Members = x.Members[from:to:to]
			return &c
		}
	default:
		return nil, nil, fmt.Errorf("a %s payload of %d bytes passes a record's %d and lists no members", p.EventType(), len(whole), PartBytes)
	}
	if err != nil {
		return nil, nil, err
	}
	// fill is how many members from from fit beside a payload of base bytes.
	fill := func(base, from int) int {
		n, size := from, base
		for n < len(sizes) && size+sizes[n]+1 <= PartBytes {
			size += sizes[n] + 1
			n++
		}
		return n
	}
	bare, err := Encode(members(p, 0, 0))
	if err != nil {
		return nil, nil, err
	}
	empty := emptyPart(p)
	bareEmpty, err := Encode(members(empty, 0, 0))
	if err != nil {
		return nil, nil, err
	}
	at := fill(len(bare), 0)
	head = members(p, 0, at)
	for at < len(sizes) {
		next := fill(len(bareEmpty), at)
		if next == at {
			return nil, nil, fmt.Errorf("a member of %d bytes passes a record part's %d", sizes[at], PartBytes)
		}
		parts = append(parts, members(empty, at, next))
		at = next
	}
	return head, parts, nil
}

// emptyPart is a payload of p's type with nothing but what a part carries.
func emptyPart(p Payload) Payload {
	switch p.(type) {
	case *GroupRenamed:
		return &GroupRenamed{}
	case *GroupDeleted:
		return &GroupDeleted{}
	}
	return nil
}

func memberSizes[M any](ms []M) ([]int, error) {
	out := make([]int, len(ms))
	for i, m := range ms {
		b, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("encode a member: %w", err)
		}
		out[i] = len(b)
	}
	return out, nil
}

// JoinMembers appends the members of part, a part of p's record, to p.
func JoinMembers(p, part Payload) error {
	switch x := p.(type) {
	case *GroupRenamed:
		if y, ok := part.(*GroupRenamed); ok {
			x.Members = append(x.Members, y.Members...)
			return nil
		}
	case *GroupDeleted:
		if y, ok := part.(*GroupDeleted); ok {
			x.Members = append(x.Members, y.Members...)
			return nil
		}
	}
	return fmt.Errorf("a %T part does not belong to a %s record", part, p.EventType())
}
