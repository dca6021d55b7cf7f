package queries

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/apperr"
)

const (
	cursorVersion = 1
	// maxCursorLen bounds the work spent on a cursor before its signature is checked. Real
	// cursors hold one key of a few attributes and stay far below it.
	maxCursorLen = 4096
	macLen       = sha256.Size
)

// listID is the identity of a list: a cursor made for one is refused by every other.
type listID struct {
	System string   `json:"s"`
	Tenant string   `json:"t"`
	List   string   `json:"l"`
	Params []string `json:"p"`
}

func (a listID) equal(b listID) bool {
	return a.System == b.System && a.Tenant == b.Tenant && a.List == b.List && slices.Equal(a.Params, b.Params)
}

// cursorBody is what a cursor carries: the list it continues and the DynamoDB key to go on
// after. Every key attribute of the read tables is a string.
type cursorBody struct {
	V   int               `json:"v"`
	ID  listID            `json:"id"`
	Key map[string]string `json:"k"`
}

// cursors signs and checks cursors with HMAC-SHA256; a cursor is base64url(mac ‖ body).
type cursors struct{ key []byte }

func (c cursors) mac(body []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write(body)
	return m.Sum(nil)
}

// encode makes the cursor that continues list id after key.
func (c cursors) encode(id listID, key map[string]types.AttributeValue) (string, error) {
	k := make(map[string]string, len(key))
	for name, v := range key {
		s, ok := v.(*types.AttributeValueMemberS)
		if !ok {
			return "", errors.New("cursor: key attribute " + name + " is not a string")
		}
		k[name] = s.Value
	}
	body, err := json.Marshal(cursorBody{V: cursorVersion, ID: id, Key: k})
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(append(c.mac(body), body...)), nil
}

func invalidCursor(msg string) error { return apperr.InvalidField("cursor", msg) }

// decode checks a cursor and returns the key to continue after. attrs are the key
// attributes the list's table or index uses; a cursor holding others is refused.
func (c cursors) decode(token string, id listID, attrs []string) (map[string]types.AttributeValue, error) {
	if len(token) > maxCursorLen {
		return nil, invalidCursor("is malformed")
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) <= macLen {
		return nil, invalidCursor("is malformed")
	}
	sum, body := raw[:macLen], raw[macLen:]
	if !hmac.Equal(sum, c.mac(body)) {
		return nil, invalidCursor("is malformed or was altered")
	}
	var cb cursorBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cb); err != nil || cb.V != cursorVersion {
		return nil, invalidCursor("is malformed")
	}
	if !cb.ID.equal(id) {
		return nil, invalidCursor("belongs to another list, tenant or set of parameters")
	}
	if len(cb.Key) != len(attrs) {
		return nil, invalidCursor("is malformed")
	}
	key := make(map[string]types.AttributeValue, len(attrs))
	for _, a := range attrs {
		v, ok := cb.Key[a]
		if !ok || v == "" {
			return nil, invalidCursor("is malformed")
		}
		key[a] = &types.AttributeValueMemberS{Value: v}
	}
	return key, nil
}
