package queries

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/apperr"
)

var testKey = bytes.Repeat([]byte{7}, 32)

func TestCursor(t *testing.T) {
	c := cursors{key: testKey}
	id := listID{System: "acme", Tenant: "eu", List: "users.last_name_prefix", Params: []string{"do"}}
	attrs := indexKey("kind", "last_name_sort")
	key := map[string]types.AttributeValue{
		"id": str("user#jdoe"), "sk": str("config"), "kind": str("user"), "last_name_sort": str("doe\u0001jdoe"),
	}
	token, err := c.encode(id, key)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a cursor gives back the key it was made from", func(t *testing.T) {
		got, err := c.decode(token, id, attrs)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range attrs {
			if got[a].(*types.AttributeValueMemberS).Value != key[a].(*types.AttributeValueMemberS).Value {
				t.Errorf("%s = %v, want %v", a, got[a], key[a])
			}
		}
	})
	raw, _ := base64.RawURLEncoding.DecodeString(token)
	refused := map[string]struct {
		token string
		id    listID
		attrs []string
	}{
		"a cursor for another tenant":            {token, listID{System: "acme", Tenant: "us", List: id.List, Params: id.Params}, attrs},
		"a cursor for another system":            {token, listID{System: "beta", Tenant: "eu", List: id.List, Params: id.Params}, attrs},
		"a cursor for another list":              {token, listID{System: "acme", Tenant: "eu", List: "users.first_name_prefix", Params: id.Params}, attrs},
		"a cursor for other parameters":          {token, listID{System: "acme", Tenant: "eu", List: id.List, Params: []string{"d"}}, attrs},
		"a cursor for another index":             {token, id, indexKey("kind", "first_name_sort")},
		"a cursor signed with another key":       {mustEncode(t, cursors{key: bytes.Repeat([]byte{8}, 32)}, id, key), id, attrs},
		"a cursor with a flipped bit":            {flipBit(raw, len(raw)/2), id, attrs},
		"a cursor with a flipped signature":      {flipBit(raw, 0), id, attrs},
		"a cursor with only a signature":         {base64.RawURLEncoding.EncodeToString(raw[:macLen]), id, attrs},
		"a cursor in standard base64 padding":    {base64.URLEncoding.EncodeToString(raw) + "==", id, attrs},
		"a cursor longer than any real cursor":   {string(bytes.Repeat([]byte("A"), maxCursorLen+1)), id, attrs},
		"a signed cursor whose body is not JSON": {base64.RawURLEncoding.EncodeToString(append(cursors{key: testKey}.mac([]byte("x")), 'x')), id, attrs},
	}
	for name, tc := range refused {
		t.Run(name+" is refused as invalid", func(t *testing.T) {
			_, err := c.decode(tc.token, tc.id, tc.attrs)
			if e, ok := apperr.As(err); !ok || e.Code != apperr.CodeValidationFailed || len(e.Fields) != 1 || e.Fields[0].Field != "cursor" {
				t.Errorf("err %v, want validation_failed on cursor", err)
			}
		})
	}
}

func mustEncode(t *testing.T, c cursors, id listID, key map[string]types.AttributeValue) string {
	t.Helper()
	s, err := c.encode(id, key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func flipBit(raw []byte, i int) string {
	b := bytes.Clone(raw)
	b[i] ^= 0x10
	return base64.RawURLEncoding.EncodeToString(b)
}
