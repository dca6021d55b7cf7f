package dynamo

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/events"
)

// TestErrorTextsNameUsersByHashOnly: the errors of decoding a user's record, which reach
// the services' logs, name the user's partition by a keyed hash, never by the username
// (STYLE.md); a group's key and the record's version stay readable.
func TestErrorTextsNameUsersByHashOnly(t *testing.T) {
	reg := events.NewRegistry()
	item := func(id string, attrs map[string]string) map[string]types.AttributeValue {
		it := map[string]types.AttributeValue{"id": str(id), "sk": str(HistorySK(3)), "schema_version": num(1), "version": num(3)}
		for k, v := range attrs {
			it[k] = str(v)
		}
		return it
	}
	for name, it := range map[string]map[string]types.AttributeValue{
		"bad time":     item("user#secret.person", map[string]string{"kind": "user", "key": "secret.person", "event_type": "user.updated", "occurred_at": "yesterday"}),
		"bad changes":  item("user#secret.person", map[string]string{"kind": "user", "key": "secret.person", "event_type": "user.updated", "occurred_at": "2026-01-02T03:04:05.000Z", "changes": "{"}),
		"no metadata":  item("user#secret.person", map[string]string{"event_type": "user.updated"}),
		"not a record": {"id": str("user#secret.person"), "sk": str(MemberSK("secret.person"))},
	} {
		_, err := DecodeRecord(reg, it)
		if err == nil {
			t.Fatalf("%s: decoded", name)
		}
		if strings.Contains(err.Error(), "secret.person") {
			t.Errorf("%s: the error names the user: %v", name, err)
		}
	}
	if got := logAgg(events.KindGroup, "ops"); got != "group#ops" {
		t.Errorf("a group in a log line is %q, want group#ops", got)
	}
	if got := logSK(HistorySK(7)); got != HistorySK(7) {
		t.Errorf("a history sort key in a log line is %q", got)
	}
}
