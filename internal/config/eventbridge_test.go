package config

import (
	"strings"
	"testing"
)

func TestEventBridgeBus(t *testing.T) {
	for _, bus := range []string{"directory-changes", "arn:aws:events:eu-west-1:123456789012:event-bus/directory-changes"} {
		c, err := LoadProjector(Map(map[string]string{"SSO_EVENTBRIDGE_BUS": bus}))
		if err != nil || c.EventBridgeBus != bus {
			t.Errorf("SSO_EVENTBRIDGE_BUS=%s: %q, %v", bus, c.EventBridgeBus, err)
		}
	}
	for _, bus := range []string{"a bus", "arn:aws:sqs:eu-west-1:123456789012:queue", strings.Repeat("b", 257)} {
		if _, err := LoadProjector(Map(map[string]string{"SSO_EVENTBRIDGE_BUS": bus})); err == nil || !strings.Contains(err.Error(), "SSO_EVENTBRIDGE_BUS") {
			t.Errorf("SSO_EVENTBRIDGE_BUS=%.20s: %v, want refused", bus, err)
		}
	}
	if c, err := LoadProjector(Map(nil)); err != nil || c.EventBridgeBus != "" {
		t.Errorf("unset: %q, %v", c.EventBridgeBus, err)
	}
}
