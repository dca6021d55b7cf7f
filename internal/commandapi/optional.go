package commandapi

import (
	"bytes"
	"encoding/json"
)

// optional is a JSON field that can be absent, null, or a value — what PATCH needs.
type optional[T any] struct {
	Set   bool
	Null  bool
	Value T
}

func (o *optional[T]) UnmarshalJSON(b []byte) error {
	o.Set = true
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		o.Null = true
		return nil
	}
	return json.Unmarshal(b, &o.Value)
}

// ptr is the value to apply: nil when absent, the zero value when null.
func (o optional[T]) ptr() *T {
	if !o.Set {
		return nil
	}
	return &o.Value
}

// attributesPatch is a PATCH's attributes: nil when absent, an empty map when null (all
// removed), else the map that replaces them.
func attributesPatch(o optional[map[string][]string]) *map[string][]string {
	if o.Null {
		return &map[string][]string{}
	}
	return o.ptr()
}
