package main

import (
	"context"

	awseb "github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/eventbridge"
)

// busPublisher is the publisher of the change feed to SSO_EVENTBRIDGE_BUS (docs/events.md,
// "EventBridge"); nil when no bus is named. Its client is built from the process's AWS
// configuration (AWS_ENDPOINT_URL_EVENTBRIDGE overrides the endpoint, as the SDK does).
func (a *app) busPublisher() (*eventbridge.Publisher, error) {
	if a.cfg.EventBridgeBus == "" {
		return nil, nil
	}
	return eventbridge.New(eventbridge.Config{
		Bus: a.cfg.EventBridgeBus, API: awseb.NewFromConfig(a.clients.AWS), DB: a.clients.DB,
		Table: changefeed.TableName(a.names), Log: a.log.Named("eventbridge"),
		Tenants: func(ctx context.Context) ([]eventbridge.Tenant, error) {
			rows, err := a.tenants.List(ctx)
			if err != nil {
				return nil, err
			}
			out := make([]eventbridge.Tenant, 0, len(rows))
			for _, r := range rows {
				out = append(out, eventbridge.Tenant{System: r.SystemID, Tenant: r.TenantID})
			}
			return out, nil
		},
	})
}

// publishToBus runs the publisher beside the record handler, so that a slow or throttling
// bus never holds up the views; woken by every append of this process, and every second
// for those of others.
func (a *app) publishToBus(ctx context.Context) {
	if a.bus != nil {
		a.bus.Run(ctx)
	}
}
