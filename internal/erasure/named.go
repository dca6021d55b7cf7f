package erasure

import (
	"encoding/json"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/identity"
)

// NamedIn reports whether an item (a stream record's keys or image) names the subject
// anywhere: a string that is the username, one of the ids or values (in any case), a key
// that ends in the username (`member#<name>`, `user#<name>`, `entity#user:<name>`), or
// such a string inside a JSON document the item holds (`data`, `changes`).
func (s *Subject) NamedIn(item map[string]types.AttributeValue) bool {
	for k, v := range item {
		if s.namesString(k) || s.namedInValue(v) {
			return true
		}
	}
	return false
}

func (s *Subject) namedInValue(v types.AttributeValue) bool {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return s.namesString(x.Value)
	case *types.AttributeValueMemberSS:
		for _, e := range x.Value {
			if s.namesString(e) {
				return true
			}
		}
	case *types.AttributeValueMemberM:
		return s.NamedIn(x.Value)
	case *types.AttributeValueMemberL:
		for _, e := range x.Value {
			if s.namedInValue(e) {
				return true
			}
		}
	}
	return false
}

// namesString is the test of one string, and of the strings of the JSON it may hold.
func (s *Subject) namesString(v string) bool {
	if s.namesToken(v) {
		return true
	}
	t := strings.TrimSpace(v)
	if !strings.HasPrefix(t, "{") && !strings.HasPrefix(t, "[") {
		return false
	}
	var doc any
	if json.Unmarshal([]byte(t), &doc) != nil {
		return false
	}
	return s.namedInJSON(doc)
}

func (s *Subject) namedInJSON(v any) bool {
	switch x := v.(type) {
	case string:
		return s.namesToken(x)
	case map[string]any:
		for k, e := range x {
			if s.namesToken(k) || s.namedInJSON(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if s.namedInJSON(e) {
				return true
			}
		}
	}
	return false
}

// namesToken: v is the username, an id or a value, or a key ending in `#<username>` or
// `:<username>`.
func (s *Subject) namesToken(v string) bool {
	if v == "" {
		return false
	}
	if u := s.Username; u != "" && (v == u || strings.HasSuffix(v, "#"+u) || strings.HasSuffix(v, ":"+u)) {
		return true
	}
	if s.IDs[v] || (len(s.idHashes) > 0 && len(v) <= 64 && s.idHashes[identity.ErasedIDHash(v)]) {
		return true
	}
	for val := range s.Values {
		if strings.EqualFold(v, val) || strings.HasSuffix(strings.ToLower(v), "#"+strings.ToLower(val)) {
			return true
		}
	}
	return false
}
