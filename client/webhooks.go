package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/ssodir/ssodir/internal/objects"
)

// NewWebhook is an endpoint to register: its URL (https, a public address), the event
// names it gets (e.g. "user.created"; all when empty) and a description.
type NewWebhook struct {
	URL         string   `json:"url"`
	Types       []string `json:"types,omitempty"`
	Description string   `json:"description,omitempty"`
}

// Webhook is a tenant's webhook endpoint and its delivery state. Secret ("whsec_…") is set
// only in the answers to CreateWebhook and RotateWebhookSecret: it is shown once. It is the
// command API's own type, so that the client and the API cannot drift apart.
type Webhook = objects.Webhook

// WebhookDelivery is one attempt to deliver one change.
type WebhookDelivery = objects.WebhookDelivery

// WebhookDeliveryPage is a page of an endpoint's delivery attempts, newest first;
// NextCursor (empty on the last page) asks for the next.
type WebhookDeliveryPage = objects.WebhookDeliveryList

// CreateWebhook registers an endpoint for the tenant's changes (scope tenants:admin); it
// gets the changes committed from now on. The answer holds its secret, shown this once.
func (t *TenantClient) CreateWebhook(ctx context.Context, in NewWebhook, opts ...Option) (*Webhook, error) {
	var out Webhook
	if _, err := t.c.call(ctx, t.c.command, http.MethodPost, t.path("/webhooks"), in, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListWebhooks lists the tenant's endpoints, without their secrets (scope tenants:admin).
func (t *TenantClient) ListWebhooks(ctx context.Context) ([]Webhook, error) {
	var out struct {
		Items []Webhook `json:"items"`
	}
	if _, err := t.c.call(ctx, t.c.command, http.MethodGet, t.path("/webhooks"), nil, &out, nil); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// GetWebhook reads one endpoint and its delivery state (scope tenants:admin).
func (t *TenantClient) GetWebhook(ctx context.Context, id string) (*Webhook, error) {
	var out Webhook
	if _, err := t.c.call(ctx, t.c.command, http.MethodGet, t.path("/webhooks/"+seg(id)), nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteWebhook removes an endpoint (scope tenants:admin).
func (t *TenantClient) DeleteWebhook(ctx context.Context, id string, opts ...Option) error {
	_, err := t.c.call(ctx, t.c.command, http.MethodDelete, t.path("/webhooks/"+seg(id)), nil, nil, opts)
	return err
}

// WebhookDeliveries reads a page of an endpoint's delivery attempts, newest first: after is
// the previous page's NextCursor ("" for the first), limit 1–200 (0: the server's 50).
func (t *TenantClient) WebhookDeliveries(ctx context.Context, id, after string, limit int) (*WebhookDeliveryPage, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	p := t.path("/webhooks/" + seg(id) + "/deliveries")
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out WebhookDeliveryPage
	if _, err := t.c.call(ctx, t.c.command, http.MethodGet, p, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReplayWebhook re-enables an endpoint and has it deliver again every change after the
// feed cursor after (a next_cursor of ReadEvents; "": go on from where it stands).
func (t *TenantClient) ReplayWebhook(ctx context.Context, id, after string, opts ...Option) (*Webhook, error) {
	body := map[string]any{}
	if after != "" {
		body["after"] = after
	}
	var out Webhook
	if _, err := t.c.call(ctx, t.c.command, http.MethodPost, t.path("/webhooks/"+seg(id)+"/replay"), body, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// RotateWebhookSecret gives an endpoint a new secret, shown this once; the replaced one
// signs too for 24 hours (two signatures in webhook-signature).
func (t *TenantClient) RotateWebhookSecret(ctx context.Context, id string, opts ...Option) (*Webhook, error) {
	var out Webhook
	if _, err := t.c.call(ctx, t.c.command, http.MethodPost, t.path("/webhooks/"+seg(id)+"/rotate-secret"), nil, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}
