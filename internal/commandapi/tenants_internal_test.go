package commandapi

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/commands"
)

// lookingTenants counts the looks for tenants left provisioning.
type lookingTenants struct {
	commands.TenantStore
	looks atomic.Int32
}

func (s *lookingTenants) ProvisioningTenants(context.Context) ([]commands.TenantRecord, error) {
	s.looks.Add(1)
	return nil, nil
}

// A long-running command API looks for tenants left provisioning at start and then every
// ProvisionResume; in Lambda mode (negative) it never does, as a scheduled task looks.
func TestProvisionResumption(t *testing.T) {
	for _, c := range []struct {
		every time.Duration
		looks bool
	}{{every: 20 * time.Millisecond, looks: true}, {every: -1, looks: false}} {
		ctx, cancel := context.WithCancel(context.Background())
		store := &lookingTenants{}
		newProvisioner(Deps{Tenants: store, Context: ctx, ProvisionResume: c.every})
		time.Sleep(200 * time.Millisecond)
		cancel()
		if n := store.looks.Load(); (n >= 2) != c.looks || (!c.looks && n != 0) {
			t.Errorf("ProvisionResume %v: %d looks", c.every, n)
		}
	}
}
