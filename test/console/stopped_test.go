package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// once waits until the element sel's text holds s exactly once.
func once(sel, s string) action {
	return poll(fmt.Sprintf(`(() => { const el = document.querySelector(%q); return !!el && el.innerText.split(%q).length === 2; })()`, sel, s))
}

// What a support person reads is in their words, the technical names on hover: who this
// tab is signed in as, whom "Done by" takes (a SCIM token by its name), the operations
// page. And a service that stopped is named, with its address once and only the hints that
// can apply: the command API when a user is created, the projector and the Keycloak sync
// on the operations page (all three on another origin than the console's, where a missing
// SSO_CORS_ORIGINS looks the same as a stopped service; "it served this page" is the query
// API's alone).
func TestStoppedServicesAndSupportWords(t *testing.T) {
	in := newInstall(t)
	cmd := in.start("command-api")
	proj := in.start("projector")
	in.start("query-api")
	ks := in.start("keycloak-sync")
	mustCall(t, 201, "POST", in.url("command-api")+"/v1/systems/demo/tenants", map[string]any{"tenant_id": "acme"})
	var tok struct{ ID, Token string }
	if err := json.Unmarshal(mustCall(t, 201, "POST", in.url("command-api")+"/v1/systems/demo/tenants/acme/scim-tokens", map[string]any{"name": "okta-prod"}), &tok); err != nil || tok.Token == "" {
		t.Fatalf("SCIM token: %+v %v", tok, err)
	}
	req, _ := http.NewRequest("POST", in.url("command-api")+"/scim/v2/demo/acme/Users", strings.NewReader(
		`{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"kwong","emails":[{"value":"kwong@example.com","primary":true}]}`))
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	req.Header.Set("Content-Type", "application/scim+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("SCIM create: %v %v", resp, err)
	}
	resp.Body.Close()
	waitProjected(t, in, "/users", 1)

	b := newBrowser(t)
	b.unreachable = true
	a := b.ctx
	b.run(a, "sign in", chromedp.Navigate(consoleURL(t, in)), waitText("#users tbody", "kwong"))
	b.run(a, "the sign-in page says in words who this tab is signed in as",
		goHash("#/signin"), waitText("#signed-in-as", "signed in as bootstrap (the development token)."),
		waitText("#signed-in-as a", "Continue as bootstrap"), waitNoText("main", "Go on as"))

	b.run(a, "“Done by” asks for words, and takes a SCIM token's name",
		goHash("#/t/demo/acme/activity"), waitText("#activity-filter", "a SCIM token’s name (such as okta-prod)"),
		waitNoText("#activity-filter", "scim-token:"),
		setValue("#activity-actor", "okta-prod"), click(`#activity-filter button[type="submit"]`),
		poll(fmt.Sprintf(`new URLSearchParams(location.hash.split("?")[1]).get("actor") === %q`, "scim-token:"+tok.ID)),
		waitText("#activity-scope", "SCIM token “okta-prod”"), waitText("#tenant-activity", "kwong"),
		poll(`document.querySelector("#activity-actor").value === "okta-prod"`))

	b.run(a, "operations in words, the metrics they come from on hover",
		goHash("#/t/demo/acme/ops"), waitText("#keycloak-sync-ready", "Ready"),
		waitText("#ops-intro", "What each service says about itself"), poll(`document.querySelector("#ops-intro").title.includes("/readyz and /metrics")`),
		waitText("#keycloak-sync-facts", "On hold because Keycloak keeps failing"),
		waitText("#keycloak-sync-facts", "Last full check that Keycloak matches the directory"),
		waitText("#keycloak-sync-facts", "Differences that check found / put right / skipped"),
		waitNoText("main", "/metrics"), waitNoText("main", "Parked"), waitNoText("main", "parked"), waitNoText("main", "reconcile"), waitNoText("main", "Drift"),
		poll(`[...document.querySelectorAll("#keycloak-sync-facts dt")].some((d) => d.title.includes("ssodir_keycloak_last_reconcile_drift"))`))

	proj.kill()
	ks.kill()
	b.run(a, "the projector and the Keycloak sync stopped: each card names its service, its address once",
		click("#refresh"), waitText("#projector-ready", "Not answering"), waitText("#keycloak-sync-ready", "Not answering"),
		waitText(`section[aria-labelledby="projector-h"]`, "Cannot reach the projector"),
		waitText(`section[aria-labelledby="projector-h"]`, "The projector at "+in.url("projector")+" did not answer."),
		once(`section[aria-labelledby="projector-h"]`, in.url("projector")),
		waitText(`section[aria-labelledby="keycloak-sync-h"]`, "Cannot reach the Keycloak sync"),
		waitText(`section[aria-labelledby="keycloak-sync-h"]`, "The Keycloak sync at "+in.url("keycloak-sync")+" did not answer."),
		once(`section[aria-labelledby="keycloak-sync-h"]`, in.url("keycloak-sync")),
		waitText("#ops", "SSO_CORS_ORIGINS list this console's origin"), waitNoText("#ops", "It served this page"))

	cmd.kill()
	b.run(a, "a user created with the command API stopped: the message names it, its address once, with the hints that can apply",
		goHash("#/t/demo/acme/users/+new"), waitFor("#user-form"),
		setValue(`#user-form [name="username"]`, "newbie"), setValue(`#user-form [name="email"]`, "newbie@example.com"),
		click(`#user-form button[type="submit"]`),
		waitText("#user-form .form-error", "Cannot reach the command API"),
		waitText("#user-form .form-error", "The command API at "+in.url("command-api")+" did not answer. Is it running, and does its SSO_CORS_ORIGINS list this console's origin, "+in.url("query-api")+"?"),
		once("#user-form", in.url("command-api")), waitNoText("#user-form", "It served this page"), waitNoText("#user-form", "the query API"))
	b.noErrors()
}
