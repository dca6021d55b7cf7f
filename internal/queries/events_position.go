package queries

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"time"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/changefeed"
)

// EventsCursorPosition reads the feed position a GET /events cursor of the tenant carries,
// for a webhook replay on the command API, which does not hold the query API's cursor key:
// the signature is not checked, only the form, the list and the tenant. That is enough
// there: the position only says where in the tenant's own feed the tenant's own endpoint
// starts again, which the caller (tenants:admin) may choose freely; a made-up time past
// the retention only passes over expired changes. field names the request field at fault.
func EventsCursorPosition(cursor, system, tenant, field string) (changefeed.Position, error) {
	bad := func(msg string) error { return apperr.InvalidField(field, msg) }
	if cursor == "" {
		return changefeed.Position{}, bad("must not be empty")
	}
	if len(cursor) > maxCursorLen {
		return changefeed.Position{}, bad("is malformed")
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(raw) <= macLen {
		return changefeed.Position{}, bad("is malformed")
	}
	var cb cursorBody
	dec := json.NewDecoder(bytes.NewReader(raw[macLen:]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cb); err != nil || cb.V != cursorVersion {
		return changefeed.Position{}, bad("is malformed")
	}
	if !cb.ID.equal(eventsList(system, tenant)) {
		return changefeed.Position{}, bad("is not a cursor of this tenant's change feed (GET /events)")
	}
	p, err1 := strconv.ParseInt(cb.Key["p"], 10, 64)
	t, err2 := strconv.ParseInt(cb.Key["t"], 10, 64)
	if err1 != nil || err2 != nil || p < 0 || t <= 0 || len(cb.Key) != 2 {
		return changefeed.Position{}, bad("is malformed")
	}
	return changefeed.Position{After: p, Seen: time.UnixMilli(t)}, nil
}
