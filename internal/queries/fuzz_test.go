package queries

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/apperr"
)

// FuzzQueryDecoding feeds arbitrary query strings, cursors and X-Min-Version values to the
// decoders. They must never panic, and must answer every input either with a value or with
// a validation error: anything else would become a 500.
func FuzzQueryDecoding(f *testing.F) {
	c := cursors{key: testKey}
	id := listID{System: "acme", Tenant: "eu", List: "groups"}
	valid, err := c.encode(id, map[string]types.AttributeValue{
		"id": str("group#ops"), "sk": str("config"), "kind": str("group"), "name_sort": str("ops"),
	})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []struct{ query, cursor, minVersion string }{
		{"", valid, "1"},
		{"email=JDoe@Example.com&limit=10", "", "12"},
		{"last_name_prefix=%C3%A9&cursor=" + valid, valid, ""},
		{"first_name_prefix=a%00&order=updated_asc", "!!", "-1"},
		{"username_prefix=J.D%40&limit=2&cursor=" + valid, valid, ""},
		{"entity=group:Site%20Admins&day=2026-02-30", valid[:10], "1e3"},
		{"actor=%FF%FE&limit=0500", "AAAA", "99999999999999999999"},
		{"limit=1&limit=2;x=%zz", valid + "A", " 3"},
		{"entity=user:&actor=&day=", "", "+1"},
	} {
		f.Add(seed.query, seed.cursor, seed.minVersion)
	}
	f.Fuzz(func(t *testing.T, query, cursor, minVersion string) {
		check := func(what string, err error) {
			if err != nil && apperr.KindOf(err) != apperr.KindInvalid {
				t.Fatalf("%s: %v is not a validation error", what, err)
			}
		}
		if q, err := ParseUsersQuery(query); err == nil {
			if _, err := q.normalize(); err != nil {
				t.Fatalf("a parsed users query does not normalize again: %v", err)
			}
		} else {
			check("users query", err)
		}
		if q, err := ParseActivityQuery(query); err == nil {
			if _, err := q.normalize(); err != nil {
				t.Fatalf("a parsed activity query does not normalize again: %v", err)
			}
		} else {
			check("activity query", err)
		}
		p, err := ParseListQuery(query)
		check("list query", err)
		if err == nil && (p.Limit < 0 || p.Limit > MaxLimit) {
			t.Fatalf("limit %d accepted", p.Limit)
		}
		_, err = ParseMinVersion([]string{minVersion})
		check("X-Min-Version", err)
		key, err := c.decode(cursor, id, indexKey("kind", "name_sort"))
		check("cursor", err)
		if err == nil && len(key) != 4 {
			t.Fatalf("a cursor decoded to %d key attributes", len(key))
		}
	})
}
