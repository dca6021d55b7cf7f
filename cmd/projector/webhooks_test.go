package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/webhooks"
)

// TestTheProjectorDeliversWebhooks: the long-running projector delivers a change of the
// feed to an endpoint registered in the shared table, signed with its secret.
func TestTheProjectorDeliversWebhooks(t *testing.T) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	got := make(chan *http.Request, 1)
	bodies := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case got <- r:
			bodies <- b
		default:
		}
	}))
	defer srv.Close()
	_, env := startProjector(t, map[string]string{"SSO_SECRET_KEY": base64.StdEncoding.EncodeToString(key),
		"SSO_WEBHOOKS_ALLOW_PRIVATE": "true"})
	db := dynamotest.Current(t).DynamoDB()
	table := changefeed.TableName(dynamo.Names{Prefix: env["SSO_TABLE_PREFIX"]})
	// The box the command API stores secrets with: a key derived from SSO_SECRET_KEY.
	box, err := webhooks.NewBox(nil, key)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store := webhooks.NewStore(db, table, box, 0, nil)
	_, secret, err := store.Create(ctx, webhooks.Endpoint{System: "acme", Tenant: "eu", ID: "e1", URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ev := `{"specversion":"1.0","id":"ev-1","type":"io.ssodir.user.created","data":{"id":"u1","version":1}}`
	if err := changefeed.NewAppender(db, table, changefeed.Options{}).Append(ctx, changefeed.Change{System: "acme", Tenant: "eu",
		Aggregate: "u1", Version: 1, Event: []byte(ev)}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		body := <-bodies
		k, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		m := hmac.New(sha256.New, k)
		m.Write([]byte(r.Header.Get("webhook-id") + "." + r.Header.Get("webhook-timestamp") + "." + string(body)))
		if want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)); r.Header.Get("webhook-signature") != want ||
			string(body) != ev || r.Header.Get("webhook-id") != "ev-1" {
			t.Fatalf("got %q with %v", body, r.Header)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the webhook did not come")
	}
}
