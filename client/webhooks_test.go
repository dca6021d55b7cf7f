package client_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/client"
)

// TestWebhooksDeliverSignedChangesAndReplay: an endpoint registered with the client gets
// the tenant's changes from the projector, signed (verified here per the Standard
// Webhooks specification); its deliveries are listed; a replay from a feed cursor sends
// them again; after a rotation both secrets sign.
func TestWebhooksDeliverSignedChangesAndReplay(t *testing.T) {
	type hit struct {
		header http.Header
		body   []byte
	}
	hits := make(chan hit, 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hits <- hit{r.Header.Clone(), b}
	}))
	defer srv.Close()
	_, ten := newTenant(t)
	ctx := context.Background()
	start, err := ten.ReadEvents(ctx, "", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	hook, err := ten.CreateWebhook(ctx, client.NewWebhook{URL: srv.URL + "/in", Types: []string{"user.created"}, Description: "HR"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(hook.Secret, "whsec_") {
		t.Fatalf("webhook %+v", hook)
	}
	if _, err := ten.CreateUser(ctx, client.NewUser{Username: "alice", Email: "alice@example.com"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ten.CreateGroup(ctx, client.NewGroup{Name: "Ops"}); err != nil { // not of the endpoint's types
		t.Fatal(err)
	}
	next := func(secrets ...string) map[string]any {
		t.Helper()
		select {
		case h := <-hits:
			for _, s := range secrets {
				key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
				m := hmac.New(sha256.New, key)
				m.Write([]byte(h.header.Get("webhook-id") + "." + h.header.Get("webhook-timestamp") + "." + string(h.body)))
				if !strings.Contains(" "+h.header.Get("webhook-signature")+" ", " v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil))+" ") {
					t.Fatalf("the signature %q does not verify with %s", h.header.Get("webhook-signature"), s)
				}
			}
			var ev map[string]any
			if err := json.Unmarshal(h.body, &ev); err != nil {
				t.Fatal(err)
			}
			return ev
		case <-time.After(2 * time.Minute):
			t.Fatal("no webhook came")
		}
		return nil
	}
	ev := next(hook.Secret)
	if ev["type"] != "io.ssodir.user.created" || ev["subject"] != "user:alice" {
		t.Fatalf("event %v", ev)
	}
	var page *client.WebhookDeliveryPage
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if page, err = ten.WebhookDeliveries(ctx, hook.ID, "", 10); err != nil {
			t.Fatal(err)
		}
		if len(page.Items) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(page.Items) != 1 || page.Items[0].Status != "delivered" || page.Items[0].EventID != ev["id"] || page.Items[0].Subject != "user:alice" {
		t.Fatalf("deliveries %+v", page)
	}

	rotated, err := ten.RotateWebhookSecret(ctx, hook.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ten.ReplayWebhook(ctx, hook.ID, start.NextCursor); err != nil {
		t.Fatal(err)
	}
	again := next(hook.Secret, rotated.Secret)
	if again["id"] != ev["id"] {
		t.Fatalf("the replay sent %v, want %v again", again["id"], ev["id"])
	}
	list, err := ten.ListWebhooks(ctx)
	if err != nil || len(list) != 1 || list[0].Secret != "" || list[0].PreviousSecretUntil == nil {
		t.Fatalf("list %+v, %v", list, err)
	}
	if err := ten.DeleteWebhook(ctx, hook.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := ten.GetWebhook(ctx, hook.ID); err == nil {
		t.Fatal("a deleted webhook is still there")
	}
}
