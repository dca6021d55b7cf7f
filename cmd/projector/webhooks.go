package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/webhooks"
)

// The projector delivers the tenants' webhooks (internal/webhooks, docs/webhooks.md): in
// its long-running process a loop of its own beside the record handler, so that a slow
// endpoint never holds up a shard; in Lambda mode the scheduled task deliver-webhooks.

// webhookDeliverer is nil, with a warning, when the process has no key to decrypt the
// endpoints' secrets (SSO_WEBHOOK_KEY, or SSO_SECRET_KEY to derive it from).
func (a *app) webhookDeliverer(ctx context.Context, reg prometheus.Registerer) (*webhooks.Deliverer, error) {
	box, err := webhooks.NewBox(a.cfg.WebhookKey, a.cfg.SecretKey)
	if err != nil {
		a.log.Warn("webhooks are not delivered: the projector needs SSO_WEBHOOK_KEY (the command API's) to read their secrets", zap.Error(err))
		return nil, nil
	}
	store := webhooks.NewStore(a.clients.DB, changefeed.TableName(a.names), box, a.cfg.EventsRetention, nil)
	return webhooks.NewDeliverer(store, webhooks.Options{Policy: webhooks.Policy{AllowPrivate: a.cfg.WebhooksAllowPrivate},
		Log: a.log.Named("webhooks"), Registerer: reg})
}

// deliverWebhooks is the long-running process's background loop.
func (a *app) deliverWebhooks(ctx context.Context, reg prometheus.Registerer) (func(context.Context), error) {
	d, err := a.webhookDeliverer(ctx, reg)
	if err != nil || d == nil {
		return func(context.Context) {}, err
	}
	// This process's appends wake it: a change goes out without waiting for its poll.
	a.hooks.Store(d)
	return d.Run, nil
}

// webhookTaskMargin is what a deliver-webhooks invocation leaves of its deadline: an
// attempt under way (10 s) and the writes after it.
const webhookTaskMargin = 20 * time.Second

// webhookTask is the Lambda-mode task: what is due, until near the invocation's deadline.
func (a *app) webhookTask(ctx context.Context) (func(context.Context) error, error) {
	d, err := a.webhookDeliverer(ctx, nil)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		if d == nil {
			return nil
		}
		until := time.Now().Add(time.Minute)
		if dl, ok := ctx.Deadline(); ok {
			until = dl.Add(-webhookTaskMargin)
		}
		return d.Drain(ctx, until)
	}, nil
}
