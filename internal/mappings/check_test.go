package mappings_test

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ssodir/ssodir/internal/mappings"
	"github.com/ssodir/ssodir/internal/mappings/mappingstest"
)

// The check reports every mapping that stopped polling (disabled, or a PROBLEM of its
// poller), across pages, and logs each one and the check itself (the stage's alarms count
// these lines).
func TestCheckReportsEveryMappingThatStoppedPolling(t *testing.T) {
	f := mappingstest.New()
	defer f.Close()
	core, logs := observer.New(zap.InfoLevel)
	m := mappings.New(client(f), mappings.Config{Functions: []string{projectorARN, syncARN}, Pace: 1000, Log: zap.New(core)})
	const tenants = 120 // more than a page of 100 per function
	for i := range tenants {
		if err := m.Ensure(t.Context(), streamARN("p_s_t"+string(rune('a'+i%26))+string(rune('a'+i/26))+"_user_commands", i%60)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := m.Check(t.Context())
	if err != nil || got != (mappings.Checked{Mappings: 2 * tenants}) {
		t.Fatalf("all polling: %+v, %v", got, err)
	}
	all := f.Mappings()
	f.SetState(all[0].UUID, "Disabled", "")
	f.SetState(all[len(all)-1].UUID, "Enabled", "PROBLEM: Function call failed")
	f.SetState(all[1].UUID, "Deleting", "")
	f.SetState(all[2].UUID, "Enabled", "OK")
	got, err = m.Check(t.Context())
	if err != nil || got != (mappings.Checked{Mappings: 2 * tenants, NotPolling: 2}) {
		t.Fatalf("two stopped: %+v, %v", got, err)
	}
	var uuids []string
	for _, e := range logs.FilterMessage(mappings.LogNotPolling).All() {
		uuids = append(uuids, e.ContextMap()["uuid"].(string))
	}
	if len(uuids) != 2 || !contains(uuids, all[0].UUID) || !contains(uuids, all[len(all)-1].UUID) {
		t.Errorf("logged as not polling: %v, want %s and %s", uuids, all[0].UUID, all[len(all)-1].UUID)
	}
	if n := logs.FilterMessage(mappings.LogChecked).Len(); n != 2 {
		t.Errorf("%d check lines, want one per check", n)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
