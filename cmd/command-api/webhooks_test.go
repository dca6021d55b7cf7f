package main

import (
	"net/http"
	"strings"
	"testing"
)

type webhookReply struct {
	ID                  string   `json:"id"`
	URL                 string   `json:"url"`
	Types               []string `json:"types"`
	Description         string   `json:"description"`
	State               string   `json:"state"`
	Secret              string   `json:"secret"`
	CreatedBy           string   `json:"created_by"`
	PreviousSecretUntil *string  `json:"previous_secret_until"`
}

func TestWebhookRoutes(t *testing.T) {
	t.Parallel()
	a := startApp(t, testEnv(t))
	base := a.newTenant(t)

	var created webhookReply
	r := a.do(t, "POST", base+"/webhooks", map[string]any{"url": "https://93.184.215.14/hook", "types": []string{"user.created", "group.member_added"},
		"description": "HR"}).want(t, http.StatusCreated)
	r.decode(t, &created)
	if !strings.HasPrefix(created.Secret, "whsec_") || created.State != "active" || created.CreatedBy != "bootstrap" ||
		len(created.Types) != 2 || created.Description != "HR" {
		t.Fatalf("created %+v", created)
	}
	if r.header.Get("Location") != base+"/webhooks/"+created.ID || r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v", r.header)
	}

	t.Run("bad input is a 400 naming the field", func(t *testing.T) {
		for body, field := range map[string]map[string]any{
			"url":         {"url": "http://93.184.215.14/hook"},
			"types":       {"url": "https://93.184.215.14/", "types": []string{"user.exploded"}},
			"description": {"url": "https://93.184.215.14/", "description": strings.Repeat("d", 501)},
		} {
			p := a.do(t, "POST", base+"/webhooks", field).wantProblem(t, http.StatusBadRequest, "validation_failed")
			if len(p.Errors) == 0 || p.Errors[0].Field != body {
				t.Errorf("%v: %+v", field, p)
			}
		}
		for _, u := range []string{"https://127.0.0.1/", "https://169.254.169.254/latest", "https://10.0.0.1/", "https://localhost/", "https://[::1]/"} {
			a.do(t, "POST", base+"/webhooks", map[string]any{"url": u}).wantProblem(t, http.StatusBadRequest, "validation_failed")
		}
		a.do(t, "POST", base+"/webhooks", map[string]any{"url": "https://93.184.215.14/", "secret": "mine"}).wantProblem(t, http.StatusBadRequest, "validation_failed")
		a.do(t, "POST", "/v1/systems/acme/tenants/nosuchtenant/webhooks", map[string]any{"url": "https://93.184.215.14/"}).
			wantProblem(t, http.StatusNotFound, "not_found")
		a.do(t, "GET", base+"/webhooks/"+created.ID+"/deliveries?limit=0", nil).wantProblem(t, http.StatusBadRequest, "validation_failed")
		a.do(t, "GET", base+"/webhooks/"+created.ID+"/deliveries?after=!!", nil).wantProblem(t, http.StatusBadRequest, "validation_failed")
		a.do(t, "POST", base+"/webhooks/"+created.ID+"/replay", map[string]any{"after": "not-a-cursor"}).
			wantProblem(t, http.StatusBadRequest, "validation_failed")
		a.do(t, "GET", base+"/webhooks/00000000-0000-0000-0000-000000000000", nil).wantProblem(t, http.StatusNotFound, "not_found")
		a.do(t, "GET", base+"/webhooks/not-an-id", nil).wantProblem(t, http.StatusNotFound, "not_found")
	})

	t.Run("list and get never show the secret", func(t *testing.T) {
		var list struct {
			Items []webhookReply `json:"items"`
		}
		a.do(t, "GET", base+"/webhooks", nil).want(t, http.StatusOK).decode(t, &list)
		if len(list.Items) != 1 || list.Items[0].ID != created.ID || list.Items[0].Secret != "" {
			t.Fatalf("list %+v", list)
		}
		var got webhookReply
		a.do(t, "GET", base+"/webhooks/"+created.ID, nil).want(t, http.StatusOK).decode(t, &got)
		if got.Secret != "" || got.URL != created.URL {
			t.Fatalf("get %+v", got)
		}
		if strings.Contains(string(a.do(t, "GET", base+"/webhooks", nil).body), "v1.local.") {
			t.Fatal("the list shows a ciphertext")
		}
	})

	t.Run("rotate-secret shows the new secret once; the old one signs on for a while", func(t *testing.T) {
		var rotated webhookReply
		a.do(t, "POST", base+"/webhooks/"+created.ID+"/rotate-secret", nil).want(t, http.StatusOK).decode(t, &rotated)
		if !strings.HasPrefix(rotated.Secret, "whsec_") || rotated.Secret == created.Secret || rotated.PreviousSecretUntil == nil {
			t.Fatalf("rotated %+v", rotated)
		}
	})

	t.Run("replay, deliveries, delete", func(t *testing.T) {
		var replayed webhookReply
		a.do(t, "POST", base+"/webhooks/"+created.ID+"/replay", nil).want(t, http.StatusOK).decode(t, &replayed)
		if replayed.State != "active" {
			t.Fatalf("replayed %+v", replayed)
		}
		var ds struct {
			Items []map[string]any `json:"items"`
		}
		a.do(t, "GET", base+"/webhooks/"+created.ID+"/deliveries?limit=10", nil).want(t, http.StatusOK).decode(t, &ds)
		if ds.Items == nil {
			t.Fatal("deliveries: items is null")
		}
		a.do(t, "DELETE", base+"/webhooks/"+created.ID, nil).want(t, http.StatusNoContent)
		a.do(t, "GET", base+"/webhooks/"+created.ID, nil).wantProblem(t, http.StatusNotFound, "not_found")
		a.do(t, "DELETE", base+"/webhooks/"+created.ID, nil).wantProblem(t, http.StatusNotFound, "not_found")
	})
}
