package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/esm/esmtest"
	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
)

// expectedUser is what a test expects the realm to hold for a directory user.
type expectedUser struct {
	email    string
	enabled  bool
	password string
}

// realmMatches compares the realm's managed users with the expected ones.
func realmMatches(kc *keycloaktest.Server, realmName string, want map[string]expectedUser) (bool, string) {
	var problems []string
	managed := 0
	for _, u := range kc.Users(realmName) {
		if len(u.Attributes["ssodir_id"]) == 0 {
			continue
		}
		managed++
		w, ok := want[u.Username]
		switch {
		case !ok:
			problems = append(problems, u.Username+" should not be there")
		case u.Email != w.email || u.Enabled != w.enabled:
			problems = append(problems, fmt.Sprintf("%s: email %s enabled %v, want %s %v", u.Username, u.Email, u.Enabled, w.email, w.enabled))
		case w.password != "":
			if pw, ok := kc.LastPassword(realmName, u.ID); !ok || pw.Value != w.password {
				problems = append(problems, u.Username+" lacks its password")
			}
		}
	}
	if managed != len(want) {
		problems = append(problems, fmt.Sprintf("%d managed users, want %d", managed, len(want)))
	}
	return len(problems) == 0, strings.Join(problems, "; ")
}

func reconcileCmd(e *env, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(binDir, "keycloak-sync"), append([]string{"reconcile", "--system", "kc", "--tenant", "t1"}, args...)...)
	cmd.Env = e.vars()
	return cmd
}

// TestReconcileAgainstASlowRealmWhileCommandsArrive runs a full reconcile against a realm
// that takes seconds per page while users are created with passwords, deactivated,
// deleted and changed. A reconcile that acted on its snapshot would delete the users
// created meanwhile (and the event path would re-create them without their password) or
// enable the deactivated ones again; afterwards the realm must equal the directory, with
// every password.
func TestReconcileAgainstASlowRealmWhileCommandsArrive(t *testing.T) {
	t.Parallel()
	e, kc, base := keycloakSetup(t)
	want := map[string]expectedUser{}
	for i := range 12 {
		name := fmt.Sprintf("old%02d", i)
		mustStatus(t, call(t, "POST", base+"/users", map[string]any{"username": name, "email": name + "@example.com"}), 201)
		want[name] = expectedUser{email: name + "@example.com", enabled: true}
	}
	eventually(t, 60*time.Second, "the realm to fill", func() (bool, string) { return realmMatches(kc, realm, want) })

	// Every page of users a reconcile reads now takes six seconds; the event path's
	// look-ups stay fast, so it syncs the commands below while the reconcile reads.
	kc.Inject(keycloaktest.Fault{Method: "GET", PathPrefix: keycloaktest.AdminPath(realm, "/users"), Query: "max=500",
		Times: 100000, Delay: 6 * time.Second})
	cmd := reconcileCmd(e)
	var out []byte
	var runErr error
	done := make(chan struct{})
	go func() { out, runErr = cmd.CombinedOutput(); close(done) }()
	time.Sleep(500 * time.Millisecond)

	for i := range 4 {
		name := fmt.Sprintf("new%02d", i)
		pw := "secret-" + name
		mustStatus(t, call(t, "POST", base+"/users", map[string]any{"username": name, "email": name + "@example.com", "password": pw}), 201)
		want[name] = expectedUser{email: name + "@example.com", enabled: true, password: pw}
	}
	for _, name := range []string{"old00", "old01"} {
		mustStatus(t, call(t, "POST", base+"/users/"+name+"/deactivate", nil), 200)
		want[name] = expectedUser{email: name + "@example.com", enabled: false}
	}
	for _, name := range []string{"old02", "old03"} {
		mustStatus(t, call(t, "DELETE", base+"/users/"+name, nil), 204)
		delete(want, name)
	}
	for _, name := range []string{"old04", "old05"} {
		mustStatus(t, call(t, "PATCH", base+"/users/"+name, map[string]any{"email": name + "@renamed.example"}), 200)
		want[name] = expectedUser{email: name + "@renamed.example", enabled: true}
	}
	<-done
	if runErr != nil {
		t.Fatalf("reconcile: %v\n%s", runErr, out)
	}
	t.Logf("reconcile during the commands:\n%s", out)
	kc.ClearFaults("")
	eventually(t, 60*time.Second, "the realm to equal the directory", func() (bool, string) { return realmMatches(kc, realm, want) })
	if again := reconcile(t, e); !strings.Contains(again, "nothing to do") {
		t.Fatalf("a quiet reconcile afterwards still finds drift:\n%s", again)
	}
	if ok, why := realmMatches(kc, realm, want); !ok {
		t.Fatal(why)
	}
}

// TestEventPathKeepsOrderAcrossLeaseMoves updates one user ten times while Keycloak answers
// PUTs slowly and the consumer is interrupted: Keycloak must end at the last version, and
// stay there. It runs in both modes: long-running keycloak-sync processes between which the
// stream lease moves (one killed, one stopped and another started), and the keycloak-sync
// function under the Runtime Interface Emulator fed by an ESM player, its environment
// killed mid-batch and cold-started by the next retry.
func TestEventPathKeepsOrderAcrossLeaseMoves(t *testing.T) {
	t.Parallel()
	t.Run("long-running", func(t *testing.T) {
		syncVars := []string{"SSO_STREAM_LEASE=3s", "SSO_RECONCILE_INTERVAL=1h"}
		var first, second *service
		keycloakSyncKeepsOrder(t, orderRun{
			start: func(e *env) { first = e.start("keycloak-sync", syncVars...) },
			slow:  func(e *env) { second = e.start("keycloak-sync", syncVars...) },
			after: func(e *env, i int) {
				switch i {
				case 4:
					first.kill()
				case 7:
					second.stop(t)
					e.start("keycloak-sync", syncVars...)
				}
			},
		})
	})
	t.Run("lambda", func(t *testing.T) {
		var (
			fn *function
			p  *esmtest.Player
		)
		keycloakSyncKeepsOrder(t, orderRun{
			start: func(e *env) {
				fn = e.startFunction("keycloak-sync", "SSO_SECRET_KEY="+e.key)
				p = streamPlayer(t, e, "kc", "t1", fn)
				playUntilCleanup(t, p, "kc/t1")
			},
			after: func(_ *env, i int) {
				if i == 4 {
					fn.kill()
				}
			},
			settled: func() {
				if f := p.Failures(); len(f) != 0 {
					t.Errorf("batches given up to the failure destination: %+v", f)
				}
				// The scheduled reconcile round and re-drive answer.
				fn.task(t, "reconcile")
				fn.task(t, "redrive-dead-letters")
			},
		})
	})
}

// orderRun is how keycloakSyncKeepsOrder runs the consumer: start once the tenant is
// provisioned, slow once Keycloak's PUTs are slow, after each of the ten updates, and
// settled at the end (each may be nil).
type orderRun struct {
	start, slow func(e *env)
	after       func(e *env, i int)
	settled     func()
}

// keycloakSyncKeepsOrder is TestEventPathKeepsOrderAcrossLeaseMoves with run's consumer.
func keycloakSyncKeepsOrder(t *testing.T, run orderRun) {
	kc := keycloaktest.NewServer(t, keycloaktest.Config{})
	kc.AddRealm(realm, "ssodir-sync", "sync-secret")
	if err := kc.SetUnmanagedAttributes(realm, true); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	api := e.start("command-api")
	e.start("projector")
	r := call(t, "POST", "http://"+api.addr+"/v1/systems/kc/tenants", map[string]any{"tenant_id": "t1",
		"keycloak": map[string]any{"url": kc.URL(), "realm": realm, "client_id": "ssodir-sync", "client_secret": "sync-secret"}})
	if r.status != 201 {
		t.Fatalf("provision: %d %s", r.status, r.body)
	}
	run.start(e)
	base := "http://" + api.addr + "/v1/systems/kc/tenants/t1"
	mustStatus(t, call(t, "POST", base+"/users", map[string]any{"username": "mover", "email": "mover@example.com"}), 201)
	eventually(t, 60*time.Second, "mover in the realm", func() (bool, string) {
		_, ok := kc.UserByUsername(realm, "mover")
		return ok, ""
	})
	kc.Inject(keycloaktest.Fault{Method: "PUT", PathPrefix: keycloaktest.AdminPath(realm, "/users/"), Times: 100000, Delay: 700 * time.Millisecond})
	if run.slow != nil {
		run.slow(e)
	}
	var last int
	for i := 1; i <= 10; i++ {
		r := call(t, "PATCH", base+"/users/mover", map[string]any{"first_name": fmt.Sprintf("v%d", i)})
		mustStatus(t, r, 200)
		var u struct{ Version int }
		r.json(t, &u)
		last = u.Version
		if run.after != nil {
			run.after(e, i)
		}
		time.Sleep(300 * time.Millisecond)
	}
	atLast := func() (bool, string) {
		u, ok := kc.UserByUsername(realm, "mover")
		v := u.Attributes["ssodir_version"]
		return ok && u.FirstName == "v10" && len(v) == 1 && v[0] == strconv.Itoa(last),
			fmt.Sprintf("first name %q, ssodir_version %v (want v10, %d)", u.FirstName, v, last)
	}
	eventually(t, 120*time.Second, "Keycloak at the last version", atLast)
	// Nothing older lands afterwards (a zombie's slow PUT, a redelivery after the move).
	time.Sleep(3 * time.Second)
	if ok, why := atLast(); !ok {
		t.Fatalf("after settling: %s", why)
	}
	if run.settled != nil {
		run.settled()
	}
}

// TestHungRealmsStallNobody hangs four tenants' realms (they accept connections and never
// answer) while a fifth tenant keeps working: its users reach its realm within seconds,
// the hung tenants are parked (keycloak-sync status says so), and when their realms
// answer again they resume by themselves with nothing lost.
func TestHungRealmsStallNobody(t *testing.T) {
	t.Parallel()
	kc := keycloaktest.NewServer(t, keycloaktest.Config{})
	e := newEnv(t)
	api := e.start("command-api")
	e.start("projector")
	e.start("keycloak-sync", "SSO_STREAM_LEASE=3s", "SSO_RECONCILE_INTERVAL=1h")
	tenants := []string{"hung1", "hung2", "hung3", "hung4", "healthy"}
	bases := map[string]string{}
	for _, name := range tenants {
		kc.AddRealm(name, "ssodir-sync", "sync-secret")
		if err := kc.SetUnmanagedAttributes(name, true); err != nil {
			t.Fatal(err)
		}
		r := call(t, "POST", "http://"+api.addr+"/v1/systems/kc/tenants", map[string]any{"tenant_id": name,
			"keycloak": map[string]any{"url": kc.URL(), "realm": name, "client_id": "ssodir-sync", "client_secret": "sync-secret"}})
		if r.status != 201 {
			t.Fatalf("provision %s: %d %s", name, r.status, r.body)
		}
		bases[name] = "http://" + api.addr + "/v1/systems/kc/tenants/" + name
		mustStatus(t, call(t, "POST", bases[name]+"/users", map[string]any{"username": "first", "email": "first@example.com"}), 201)
	}
	eventually(t, 60*time.Second, "every realm to get its first user", func() (bool, string) {
		for _, name := range tenants {
			if _, ok := kc.UserByUsername(name, "first"); !ok {
				return false, name + " has not"
			}
		}
		return true, ""
	})

	for _, name := range tenants[:4] {
		kc.Inject(keycloaktest.Fault{PathPrefix: keycloaktest.AdminPath(name, ""), Times: 1 << 30, Hang: true})
	}
	// More records of hung tenants than the consumer has delivery slots.
	var wg sync.WaitGroup
	for _, name := range tenants[:4] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 12 {
				mustStatus(t, call(t, "POST", bases[name]+"/users", map[string]any{"username": fmt.Sprintf("u%02d", i),
					"email": fmt.Sprintf("u%02d@example.com", i)}), 201)
			}
		}()
	}
	wg.Wait()
	time.Sleep(time.Second)
	for i := range 5 {
		name := fmt.Sprintf("ok%02d", i)
		mustStatus(t, call(t, "POST", bases["healthy"]+"/users", map[string]any{"username": name, "email": name + "@example.com"}), 201)
		// A few seconds, not the minutes that hung records holding every slot would cost.
		eventually(t, 15*time.Second, name+" in the healthy realm", func() (bool, string) {
			_, ok := kc.UserByUsername("healthy", name)
			return ok, ""
		})
	}

	// A hung realm is parked once its first call has timed out, which on a loaded machine
	// may come after the healthy realm's users: wait for it, do not race it.
	var parked map[string]bool
	eventually(t, 60*time.Second, "every hung tenant shown parked", func() (bool, string) {
		status := exec.Command(filepath.Join(binDir, "keycloak-sync"), "status", "-o", "json")
		status.Env = e.vars()
		out, err := status.CombinedOutput()
		if err != nil {
			t.Fatalf("status: %v\n%s", err, out)
		}
		var rows []struct {
			Tenant string `json:"tenant"`
			Parked bool   `json:"parked"`
			Reason string `json:"parked_reason"`
		}
		if err := json.Unmarshal(out, &rows); err != nil {
			t.Fatalf("status output: %v\n%s", err, out)
		}
		parked = map[string]bool{}
		for _, r := range rows {
			parked[r.Tenant] = r.Parked
		}
		for _, name := range tenants[:4] {
			if !parked["kc/"+name] {
				return false, name + " is not shown parked:\n" + string(out)
			}
		}
		return true, ""
	})
	if parked["kc/healthy"] {
		t.Errorf("the healthy tenant is shown parked")
	}

	kc.ClearFaults("")
	eventually(t, 90*time.Second, "the hung tenants to resume by themselves", func() (bool, string) {
		for _, name := range tenants[:4] {
			if n := len(kc.Users(name)); n != 13 {
				return false, fmt.Sprintf("%s has %d of 13 users", name, n)
			}
		}
		return true, ""
	})
}
