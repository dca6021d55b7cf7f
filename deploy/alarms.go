package main

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/jsii-runtime-go"
)

// Log lines the services write (internal/streams, internal/keycloaksync) that an operator
// must act on; metric filters count them, in both ways of running the consumers.
const (
	logDeadLettered = "record dead-lettered*"
	logParked       = "keycloak realm failing: tenant parked*"
	// internal/mappings.LogNotPolling and LogChecked, of the command API's check-mappings.
	logNotPolling     = "event source mapping not polling"
	logMappingChecked = "event source mappings checked"
	// internal/commands.StageTablesMessage: the stage's table count, logged by every round
	// that finishes pending tenants (the command API, both modes), in the field tables.
	logStageTables = "stage tables"
)

// tableQuota is the stage's table quota: the command API refuses a tenant past it
// (SSO_TABLE_QUOTA), and the TableQuota alarm warns at tableQuotaWarning of it.
func (s *Stage) tableQuota() int {
	if s.Props.TableQuota > 0 {
		return s.Props.TableQuota
	}
	return accountTableQuota
}

// accountTableQuota is DynamoDB's default quota of tables per account and region (raisable:
// -c table-quota=N names the stage's); tableQuotaWarning the share at which an operator is
// told, while there is still room to raise it before tenants are refused.
const (
	accountTableQuota = 2500
	tableQuotaWarning = 0.8
)

// iteratorAgeLimit is how far behind its stream a consumer may fall before someone looks:
// records are kept 24 h, and a view minutes old is already visibly stale.
const iteratorAgeLimit = 5 * 60 * 1000 // ms

// failureAgeLimit is how long a consumer's failure record may wait in its queue: the
// consumer reads it at once, so one that stays is a repair that keeps failing.
const failureAgeLimit = 15 * 60 // s

// alarmName is the name of one of the stage's alarms; fromAlarms matches all of them and
// no other stage's (a stage name has no '-').
func (s *Stage) alarmName(id string) string { return "ssodir-" + s.Props.Stage + "-" + id }

func (s *Stage) fromAlarms() map[string]any {
	return map[string]any{
		"StringEquals": map[string]any{"aws:SourceAccount": s.Stack.Account()},
		"ArnLike": map[string]any{"aws:SourceArn": s.Stack.FormatArn(&awscdk.ArnComponents{Service: jsii.String("cloudwatch"),
			Resource: jsii.String("alarm"), ResourceName: jsii.String(s.alarmName("*")), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME})},
	}
}

// alarms are what an operator must act on, sent to one topic; the dashboard shows them
// with their context.
func (s *Stage) alarms() {
	topic := awssns.NewTopic(s.Stack, jsii.String("Alarms"), &awssns.TopicProps{
		DisplayName: jsii.String("ssodir " + s.Props.Stage + " alarms"),
		MasterKey:   s.DataKey,
		EnforceSSL:  jsii.Bool(true),
	})
	// EnforceSSL gives the topic a policy of its own, which replaces SNS's default one: it
	// must let CloudWatch publish, for this stage's alarms only (the confused deputy: no
	// other account's or stage's alarm may use the topic), and the data key, which encrypts
	// the topic, must let CloudWatch use it on the same terms.
	cloudwatch := awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)
	fromAlarms := s.fromAlarms()
	topic.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudWatchAlarmsPublish"),
		Principals: &[]awsiam.IPrincipal{cloudwatch},
		Actions:    jsii.Strings("sns:Publish"),
		Resources:  &[]*string{topic.TopicArn()},
		Conditions: &fromAlarms,
	}))
	s.DataKey.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudWatchAlarmsPublish"),
		Principals: &[]awsiam.IPrincipal{cloudwatch},
		Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey*"),
		Resources:  jsii.Strings("*"),
		Conditions: &fromAlarms,
	}), nil)
	s.AlarmTopic = topic
	awscdk.NewCfnOutput(s.Stack, jsii.String("AlarmTopicArn"), &awscdk.CfnOutputProps{
		Value: topic.TopicArn(), Description: jsii.String("subscribe the on-call to this topic"),
	})
	action := awscloudwatchactions.NewSnsAction(topic)
	five := awscdk.Duration_Minutes(jsii.Number(5))
	alarm := func(id, description string, metric awscloudwatch.IMetric, threshold float64, periods float64) awscloudwatch.Alarm {
		a := awscloudwatch.NewAlarm(s.Stack, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmName:          jsii.String(s.alarmName(id)),
			AlarmDescription:   jsii.String(description),
			Metric:             metric,
			Threshold:          jsii.Number(threshold),
			EvaluationPeriods:  jsii.Number(periods),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		a.AddAlarmAction(action)
		return a
	}
	namespace := "ssodir/" + s.Props.Stage
	counted := func(service, metric, pattern string) awscloudwatch.Metric {
		awslogs.NewMetricFilter(s.Stack, jsii.String(id(service)+metric+"Filter"), &awslogs.MetricFilterProps{
			LogGroup:        s.LogGroups[service],
			FilterPattern:   awslogs.FilterPattern_Literal(jsii.String(`{ $.msg = "` + pattern + `" }`)),
			MetricNamespace: jsii.String(namespace),
			MetricName:      jsii.String(metric),
			MetricValue:     jsii.String("1"),
			Dimensions:      &map[string]*string{"Service": jsii.String("$.service")},
		})
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: jsii.String(namespace), MetricName: jsii.String(metric),
			DimensionsMap: &map[string]*string{"Service": jsii.String(service)}, Statistic: jsii.String("Sum"), Period: five})
	}

	var alarmsByRow [][]awscloudwatch.IAlarm
	var streamRow []awscloudwatch.IWidget
	for _, service := range []string{Projector, KeycloakSync} {
		fn := s.Functions[service]
		age := fn.Metric(jsii.String("IteratorAge"), &awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum"), Period: awscdk.Duration_Minutes(jsii.Number(1))})
		dead := counted(service, "DeadLetters", logDeadLettered)
		alarmsByRow = append(alarmsByRow, []awscloudwatch.IAlarm{
			alarm(id(service)+"IteratorAge", service+" is more than 5 minutes behind a tenant's stream for 5 minutes: look at its errors and throttles", age, iteratorAgeLimit, 5),
			alarm(id(service)+"DeadLetters", service+" dead-lettered a record: its aggregate waits until it is re-driven (`"+service+" dead-letters list`)", dead, 1, 1),
		})
		streamRow = append(streamRow, awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(service + ": iterator age (ms) and dead letters"), Left: &[]awscloudwatch.IMetric{age}, Right: &[]awscloudwatch.IMetric{dead}, Width: jsii.Number(8)}))
	}
	// A consumer that stops polling (its mapping disabled, or its poller failing) publishes
	// no IteratorAge at all, and an idle stage none either, so missing iterator age cannot
	// be an alarm: the command API's scheduled check-mappings reads every mapping's state,
	// logs each that does not poll, and logs each check; no check for 15 minutes alarms too.
	notPolling := counted(CommandAPI, "MappingsNotPolling", logNotPolling)
	checks := counted(CommandAPI, "MappingChecks", logMappingChecked)
	missed := awscloudwatch.NewAlarm(s.Stack, jsii.String("MappingCheckMissing"), &awscloudwatch.AlarmProps{
		AlarmName:          jsii.String(s.alarmName("MappingCheckMissing")),
		AlarmDescription:   jsii.String("no check of the event source mappings ran for 15 minutes (command-api's check-mappings schedule): whether the consumers poll is unknown"),
		Metric:             checks,
		Threshold:          jsii.Number(1),
		EvaluationPeriods:  jsii.Number(3),
		ComparisonOperator: awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_BREACHING,
	})
	missed.AddAlarmAction(action)
	alarmsByRow = append(alarmsByRow, []awscloudwatch.IAlarm{
		alarm("MappingsNotPolling", "an event source mapping does not poll its stream (disabled, or its poller reports a PROBLEM): its tenant's views or realm fall behind in silence; the command API's log names it", notPolling, 1, 1),
		missed,
	})
	streamRow = append(streamRow, awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
		Title: jsii.String("event source mappings: not polling, checks"), Left: &[]awscloudwatch.IMetric{notPolling, checks}, Width: jsii.Number(8)}))
	// The stage's tables against the account's quota: at 80 % an operator raises the quota
	// (or moves tenants to another account) before provisioning answers table_quota_exceeded.
	awslogs.NewMetricFilter(s.Stack, jsii.String("StageTablesFilter"), &awslogs.MetricFilterProps{
		LogGroup:        s.LogGroups[CommandAPI],
		FilterPattern:   awslogs.FilterPattern_Literal(jsii.String(`{ $.msg = "` + logStageTables + `" }`)),
		MetricNamespace: jsii.String(namespace),
		MetricName:      jsii.String("StageTables"),
		MetricValue:     jsii.String("$.tables"),
	})
	stageTables := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: jsii.String(namespace), MetricName: jsii.String("StageTables"),
		Statistic: jsii.String("Maximum"), Period: five})
	quota := s.tableQuota()
	alarmsByRow = append(alarmsByRow, []awscloudwatch.IAlarm{
		alarm("TableQuota", fmt.Sprintf("the stage has %.0f %% of the account's table quota (%d tables): raise the quota (Service Quotas, DynamoDB tables per region) before tenants are refused with table_quota_exceeded", tableQuotaWarning*100, quota),
			stageTables, float64(quota)*tableQuotaWarning, 1),
	})
	parked := counted(KeycloakSync, "ParkedTenants", logParked)
	// A consumer's failure queue is read at once by the consumer: every message sent is an
	// alert (records were given up on; the tenant is being replayed or reconciled), and one
	// left there is a repair that keeps failing (the function's log says why).
	var failureMetrics []awscloudwatch.IMetric
	row := []awscloudwatch.IAlarm{
		alarm("ParkedTenant", "keycloak-sync parked a tenant whose Keycloak realm keeps failing; its records wait in order (`keycloak-sync status`)", parked, 1, 1),
	}
	for _, c := range Consumers {
		q := s.FailureQueues[c]
		sent := q.MetricNumberOfMessagesSent(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: five})
		oldest := q.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum"), Period: five})
		failureMetrics = append(failureMetrics, sent, oldest)
		row = append(row,
			alarm(id(c)+"FailedBatches", c+"'s event source mapping gave up stream records (out of retries or too old): the "+c+
				" repairs the tenant ("+map[string]string{Projector: "marked for replay", KeycloakSync: "reconciled at once"}[c]+
				"); its log has the tenant and the sequence numbers (docs/aws.md, records an event source mapping gave up)", sent, 1, 1),
			alarm(id(c)+"FailuresUnrepaired", "a failure record of "+c+"'s mappings has waited 15 minutes: the "+c+
				" cannot repair the tenant (its log: could not repair after records the event source mapping gave up)", oldest, failureAgeLimit, 1),
		)
	}
	alarmsByRow = append(alarmsByRow, row)
	streamRow = append(streamRow, awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
		Title: jsii.String("parked tenants and given-up stream records"), Left: &[]awscloudwatch.IMetric{parked, failureMetrics[0], failureMetrics[2]},
		Right: &[]awscloudwatch.IMetric{failureMetrics[1], failureMetrics[3]}, Width: jsii.Number(8)}))

	var apiRow []awscloudwatch.IWidget
	for _, service := range []string{CommandAPI, QueryAPI} {
		api := s.APIs[service]
		errors := api.MetricServerError(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: five})
		alarmsByRow = append(alarmsByRow, []awscloudwatch.IAlarm{
			alarm(id(service)+"5xx", "the "+service+" answered 5xx (503: DynamoDB throttled or unreachable; 500: a defect)", errors, 5, 1),
		})
		apiRow = append(apiRow, awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(service + ": requests, 5xx, latency p99"),
			Left:  &[]awscloudwatch.IMetric{api.MetricCount(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: five}), errors},
			Right: &[]awscloudwatch.IMetric{api.MetricLatency(&awscloudwatch.MetricOptions{Statistic: jsii.String("p99"), Period: five})},
			Width: jsii.Number(12),
		}))
	}

	var fnRow []awscloudwatch.IWidget
	for _, service := range Services {
		fn := s.Functions[service]
		errors := fn.MetricErrors(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: five})
		throttles := fn.MetricThrottles(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: five})
		alarmsByRow = append(alarmsByRow, []awscloudwatch.IAlarm{
			alarm(id(service)+"Errors", "the "+service+" function failed an invocation (its log group has the error)", errors, 1, 1),
			alarm(id(service)+"Throttles", "the "+service+" function was throttled: the account's or its concurrency is exhausted", throttles, 1, 1),
		})
		fnRow = append(fnRow, awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(service + ": errors, throttles, duration p99"), Left: &[]awscloudwatch.IMetric{errors, throttles},
			Right: &[]awscloudwatch.IMetric{fn.MetricDuration(&awscloudwatch.MetricOptions{Statistic: jsii.String("p99"), Period: five})}, Width: jsii.Number(6)}))
	}

	// The system tables' throttling; a tenant table's shows as 503s and iterator age.
	var tableRow []awscloudwatch.IWidget
	for _, name := range sortedKeys(s.Tables) {
		m := s.Tables[name].MetricThrottledRequestsForOperations(&awsdynamodb.OperationsMetricOptions{
			Operations: &[]awsdynamodb.Operation{awsdynamodb.Operation_GET_ITEM, awsdynamodb.Operation_PUT_ITEM, awsdynamodb.Operation_UPDATE_ITEM,
				awsdynamodb.Operation_DELETE_ITEM, awsdynamodb.Operation_QUERY, awsdynamodb.Operation_TRANSACT_WRITE_ITEMS},
			Period: five, Label: jsii.String(name),
		})
		tableRow = append(tableRow, awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(name + ": throttled"), Left: &[]awscloudwatch.IMetric{m}, Width: jsii.Number(4)}))
		alarmsByRow = append(alarmsByRow, []awscloudwatch.IAlarm{
			alarm("Throttled"+id(name[len(s.Props.Prefix)+1:]), "DynamoDB throttled requests on "+name, m, 1, 1),
		})
	}

	var all []interfacesawscloudwatch.IAlarmRef
	for _, row := range alarmsByRow {
		for _, a := range row {
			all = append(all, a)
		}
	}
	awscloudwatch.NewDashboard(s.Stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String("ssodir-" + s.Props.Stage),
		Widgets: &[]*[]awscloudwatch.IWidget{
			{awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{Title: jsii.String("alarms"), Alarms: &all, Width: jsii.Number(24)})},
			&apiRow, &fnRow, &streamRow,
			&tableRow,
		},
	})
}
