package main

import (
	"encoding/json"
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"
)

// Throttling of each API's stage: beyond it API Gateway answers 429 before a function
// runs, which bounds what one misbehaving client can cost.
const (
	apiRateLimit  = 500
	apiBurstLimit = 1000
)

// HTTP APIs carry the two services; every route goes to the function (the services
// authenticate each request themselves: OIDC JWTs, SCIM tokens, and the open routes of
// API.md — /healthz, /readyz, /openapi.json, /console/; the functions do not serve /metrics).
func (s *Stage) apis() {
	query, command := s.httpAPI(QueryAPI), s.httpAPI(CommandAPI)
	s.QueryURL, s.CommandURL = query.Url(), command.Url()
	// The web console (served by the query API) calls the command API from the browser;
	// the endpoint is the console's origin (no trailing slash).
	s.Functions[CommandAPI].AddEnvironment(jsii.String("SSO_CORS_ORIGINS"), query.ApiEndpoint(), nil)
	awscdk.NewCfnOutput(s.Stack, jsii.String("CommandApiUrl"), &awscdk.CfnOutputProps{Value: s.CommandURL, Description: jsii.String("the command API")})
	awscdk.NewCfnOutput(s.Stack, jsii.String("QueryApiUrl"), &awscdk.CfnOutputProps{Value: s.QueryURL, Description: jsii.String("the query API")})
	awscdk.NewCfnOutput(s.Stack, jsii.String("ConsoleUrl"), &awscdk.CfnOutputProps{
		Value: awscdk.Fn_Join(jsii.String(""), &[]*string{s.QueryURL, jsii.String("console/")}), Description: jsii.String("the web console")})
}

func (s *Stage) httpAPI(service string) awsapigatewayv2.HttpApi {
	api := awsapigatewayv2.NewHttpApi(s.Stack, jsii.String(id(service)+"Http"), &awsapigatewayv2.HttpApiProps{
		ApiName:            jsii.String(s.functionName(service)),
		Description:        jsii.String("ssodir " + service + " (" + s.Props.Stage + ")"),
		DefaultIntegration: awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String(id(service)+"Integration"), s.Functions[service], nil),
		CreateDefaultStage: jsii.Bool(true),
	})
	access := awslogs.NewLogGroup(s.Stack, jsii.String(id(service)+"AccessLogs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/ssodir/" + s.Props.Stage + "/" + service + "/access"),
		Retention:     s.Props.LogRetention,
		RemovalPolicy: dataRemoval,
	})
	format, _ := json.Marshal(map[string]string{
		"requestId": "$context.requestId", "ip": "$context.identity.sourceIp", "time": "$context.requestTime",
		"method": "$context.httpMethod", "path": "$context.path", "status": "$context.status",
		"latency": "$context.responseLatency", "integrationError": "$context.integrationErrorMessage",
	})
	stage := api.DefaultStage().Node().DefaultChild().(awsapigatewayv2.CfnStage)
	stage.SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
		DestinationArn: access.LogGroupArn(), Format: jsii.String(string(format)),
	})
	stage.SetDefaultRouteSettings(&awsapigatewayv2.CfnStage_RouteSettingsProperty{
		ThrottlingRateLimit: jsii.Number(apiRateLimit), ThrottlingBurstLimit: jsii.Number(apiBurstLimit),
		DetailedMetricsEnabled: jsii.Bool(true),
	})
	s.APIs[service] = api
	return api
}

// Background work that the long-running services do on timers arrives in Lambda mode as
// a scheduled event with a constant input naming the task (docs/aws.md, "Lambda mode").
type schedule struct {
	service, task string
	every         float64 // minutes
}

var schedules = []schedule{
	{CommandAPI, "resume-provisioning", 1},
	{CommandAPI, "check-mappings", 5},
	{KeycloakSync, "reconcile", 15},
	{KeycloakSync, "redrive-dead-letters", 1},
	// Every few minutes: a throttle or a short outage makes dead letters, which wait for it.
	{Projector, "redrive-dead-letters", 5},
	{Projector, "resume-erasures", 1},
	// Webhooks due: each run delivers until near its deadline or nothing is due.
	{Projector, "deliver-webhooks", 1},
	// Memberships end within a minute of their expiry (docs/expiry.md).
	{Projector, "expire-memberships", 1},
}

// publishEvents is the projector's task that sends the change feed to the stage's bus
// (docs/events.md, "EventBridge"): scheduled only when the stage names one.
var publishEvents = schedule{Projector, "publish-events", 1}

// scheduled are the stage's scheduled tasks.
func (s *Stage) scheduled() []schedule {
	if s.Props.EventBus == "" {
		return schedules
	}
	return append(slices.Clone(schedules), publishEvents)
}

// A scheduled task is never retried: its next tick comes soon, and a retry would run beside
// it (two overlapping reconcile rounds). Neither EventBridge (RetryAttempts 0) nor Lambda's
// asynchronous invocation (MaximumRetryAttempts 0, and no tick older than its interval) tries
// again.
func (s *Stage) schedules() {
	all := s.scheduled()
	every := map[string]float64{}
	for _, sc := range all {
		if m, ok := every[sc.service]; !ok || sc.every < m {
			every[sc.service] = sc.every
		}
	}
	for _, service := range sortedKeys(every) {
		s.Functions[service].ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
			RetryAttempts: jsii.Number(0),
			MaxEventAge:   awscdk.Duration_Minutes(jsii.Number(every[service])),
		})
	}
	for _, sc := range all {
		awsevents.NewRule(s.Stack, jsii.String(id(sc.service)+id(sc.task)), &awsevents.RuleProps{
			Description: jsii.String("ssodir " + sc.service + ": " + sc.task),
			Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(sc.every))),
			Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(s.Functions[sc.service], &awseventstargets.LambdaFunctionProps{
				Event:         awsevents.RuleTargetInput_FromObject(map[string]string{"ssodir_task": sc.task}),
				RetryAttempts: jsii.Number(0),
				MaxEventAge:   awscdk.Duration_Minutes(jsii.Number(sc.every)),
			})},
		})
	}
}
