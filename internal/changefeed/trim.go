package changefeed

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// MaxEventBytes is the largest CloudEvent the feed stores whole. A feed item is its event
// and a few short attributes, and DynamoDB's item limit is 400 KB; a change larger than this
// (a user with very large attributes changed wholesale: the change set holds old and new)
// is stored trimmed (Trim), so that its record never dead-letters for its size.
const MaxEventBytes = 350 << 10

// trimmed is the data of a trimmed CloudEvent: what names the change, a flag, and where the
// aggregate's state is on the query API. The change set and the state are left out.
type trimmed struct {
	ID        string `json:"id"`
	Version   int64  `json:"version"`
	Actor     string `json:"actor"`
	Truncated bool   `json:"truncated"`
	// Href is the aggregate's path on the query API (its state now, ETag = its version),
	// from the CloudEvent's subject; absent when the event has none (user.erased).
	Href string `json:"href,omitempty"`
}

// Trim answers raw (a CloudEvent's JSON) if it is at most limit bytes; otherwise the same
// CloudEvent with its data replaced by {id, version, actor, truncated: true, href}. The
// result of a trim is small (a few hundred bytes) whatever the event.
func Trim(raw []byte, limit int) ([]byte, error) {
	if len(raw) <= limit {
		return raw, nil
	}
	var ev map[string]json.RawMessage
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, fmt.Errorf("changefeed: trim an event: %w", err)
	}
	var d trimmed
	if err := json.Unmarshal(ev["data"], &d); err != nil {
		return nil, fmt.Errorf("changefeed: trim an event's data: %w", err)
	}
	d.Truncated = true
	var source, subject string
	_ = json.Unmarshal(ev["source"], &source)
	_ = json.Unmarshal(ev["subject"], &subject)
	d.Href = href(source, subject)
	data, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	ev["data"] = data
	return json.Marshal(ev)
}

// href is the query API path of a CloudEvent's subject (`user:<username>`, `group:<key>`).
func href(source, subject string) string {
	kind, key, ok := strings.Cut(subject, ":")
	if !ok || source == "" || key == "" {
		return ""
	}
	switch kind {
	case "user":
		return source + "/users/" + url.PathEscape(key)
	case "group":
		return source + "/groups/" + url.PathEscape(key)
	}
	return ""
}
