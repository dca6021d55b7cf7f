package main

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
)

// Grant is one statement of a function's role. Least privilege is proven by the tests
// (leastprivilege_test.go): every AWS call a service makes in the end-to-end tests must be
// allowed by its function's grants, and every action of a grant without a Reason must have
// been made by that service in some test. A Reason says why an action is allowed that no
// test can record: AWS makes the call with the function's role (the Lambda service writing
// logs, DynamoDB using the table key), or only a path no test reaches needs it.
type Grant struct {
	// Sid names the statement in the template.
	Sid        string
	Actions    []string
	Resources  []*string
	Conditions map[string]any
	Reason     string
}

func (s *Stage) role(service string) awsiam.Role {
	return awsiam.NewRole(s.Stack, jsii.String(id(service)+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("ssodir " + service + " (" + s.Props.Stage + "): exactly what the function uses (deploy/policies.go)"),
	})
}

// arn is an ARN of this stack's partition, region and account.
func (s *Stage) arn(service, resource, name string) *string {
	return s.Stack.FormatArn(&awscdk.ArnComponents{Service: jsii.String(service), Resource: jsii.String(resource), ResourceName: jsii.String(name)})
}

// Table patterns: every table ssodir uses starts with the stage's prefix (dynamo.Names).
func (s *Stage) tables() []*string {
	return []*string{s.arn("dynamodb", "table", s.Props.Prefix+"_*"), s.arn("dynamodb", "table", s.Props.Prefix+"_*/index/*")}
}

func (s *Stage) streams() []*string {
	return []*string{s.arn("dynamodb", "table", s.Props.Prefix+"_*/stream/*")}
}

// tenantTables are the names only tenant tables have (dynamo.Names: _user_commands, _users,
// _activities and a replay's _users_r<n>, _activities_r<n>): the command API creates and
// drops these, never a system table.
func (s *Stage) tenantTables() []*string {
	var out []*string
	for _, suffix := range []string{"_user_commands", "_users", "_users_r*", "_activities", "_activities_r*"} {
		out = append(out, s.arn("dynamodb", "table", s.Props.Prefix+"_*"+suffix))
	}
	return out
}

func (s *Stage) viaService(service string) map[string]any {
	return map[string]any{"StringEquals": map[string]any{
		"kms:ViaService": fmt.Sprintf("%s.%s.amazonaws.com", service, *s.Stack.Region()),
	}}
}

const (
	reasonLogs = "the Lambda service writes the function's logs with its role; the code makes no such call"
	// DynamoDB asks KMS for the table key with the caller's permission (through DynamoDB
	// only: kms:ViaService), which the recorder cannot see.
	reasonTableKeyRead  = "DynamoDB decrypts the table key of the stage's tables (SSE with DataKey) on the function's behalf; the code makes no KMS call for it"
	reasonTableKeyWrite = "DynamoDB encrypts and decrypts with the table key of the stage's tables (SSE with DataKey) on the function's behalf; the code makes no KMS call for it"
	reasonTableKeyGrant = "creating a table encrypted with DataKey (a tenant's, at provisioning) has DynamoDB create a grant on the key and describe it with the caller's permission"
	reasonSecretKey     = "Secrets Manager decrypts the secret (encrypted with DataKey) on the function's behalf when the function reads it"
	reasonFailures      = "Lambda's stream poller sends the description of records it gave up on to the consumer's failure queue with the function's role"
	reasonFailureQueue  = "Lambda's SQS poller reads the consumer's failure queue with the function's role and invokes the function with its messages (esm.Recovery)"
	reasonStreamsLambda = "in Lambda mode the event source mapping's poller reads the stream with the function's role"
	reasonBackups       = "point-in-time recovery of a new tenant's tables (SSO_TABLE_PITR): DynamoDB Local, which the end-to-end tests run on, has no backups; " +
		"internal/dynamo's TestTenantTablesGetTheStagesSettingsAndDroppingTurnsDeletionProtectionOffFirst checks these requests"
	reasonMappingsDrop = "removing a dropped tenant's mappings by the stream ARN its incarnation recorded (internal/mappings.Remove): " +
		"internal/mappings' tests cover it on the Lambda fake; an end-to-end run need not reach a drop that finds mappings"
	reasonDrop = "dropping a tenant's tables on purpose (deletion protection off, then DeleteTable) when a provisioning hits the account's table quota: " +
		"the end-to-end tests never reach the quota; cmd/command-api's provisioning tests and internal/dynamo's table settings test cover it"
)

const reasonWebhookKey = "the command API and the projector read SSO_WEBHOOK_KEY, the key of the webhooks' secrets, from this secret " +
	"at start (internal/webhooks, box.go); the end-to-end tests derive it from SSO_SECRET_KEY instead, so no test records the read"

const reasonAccessReport = "GET /access-report scans the tenant's read table page by page (internal/asof, report.go); " +
	"its tests run the query API's handlers on DynamoDB Local (internal/queries, cmd/query-api), not an end-to-end run"

// eventBusARN is the ARN of the stage's bus: as given, or the name's in the stage's account
// and region.
func (s *Stage) eventBusARN() *string {
	if strings.HasPrefix(s.Props.EventBus, "arn:") {
		return jsii.String(s.Props.EventBus)
	}
	return s.arn("events", "event-bus", s.Props.EventBus)
}

// policies gives each function's role its grants.
func (s *Stage) policies() {
	key := s.DataKey.KeyArn()
	secretsKey := s.SecretsKey.KeyArn()
	logs := func(service string) Grant {
		return Grant{Sid: "Logs", Actions: []string{"logs:CreateLogStream", "logs:PutLogEvents"},
			Resources: []*string{s.LogGroups[service].LogGroupArn()}, Reason: reasonLogs}
	}
	readKey := Grant{Sid: "TableKey", Actions: []string{"kms:Decrypt", "kms:DescribeKey"}, Resources: []*string{key},
		Conditions: s.viaService("dynamodb"), Reason: reasonTableKeyRead}
	writeKey := Grant{Sid: "TableKey", Actions: []string{"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"},
		Resources: []*string{key}, Conditions: s.viaService("dynamodb"), Reason: reasonTableKeyWrite}
	secretKey := Grant{Sid: "SecretDecrypt", Actions: []string{"kms:Decrypt"}, Resources: []*string{key},
		Conditions: s.viaService("secretsmanager"), Reason: reasonSecretKey}
	webhookKey := Grant{Sid: "WebhookKey", Actions: []string{"secretsmanager:GetSecretValue"}, Resources: []*string{s.WebhookKey.SecretArn()},
		Reason: reasonWebhookKey}
	streams := Grant{Sid: "Streams", Actions: []string{"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"},
		Resources: s.streams()}
	// Each consumer's mappings send to its own queue, which it alone reads.
	failures := func(service string) []Grant {
		q := []*string{s.FailureQueues[service].QueueArn()}
		return []Grant{
			{Sid: "StreamFailures", Actions: []string{"sqs:SendMessage"}, Resources: q, Reason: reasonFailures},
			{Sid: "StreamFailuresRead", Actions: []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"},
				Resources: q, Reason: reasonFailureQueue},
		}
	}
	consumers := []*string{s.Functions[Projector].FunctionArn(), s.Functions[KeycloakSync].FunctionArn()}
	// Listing the tenants is a Scan of {p}_Config, and of no other table.
	tenantList := Grant{Sid: "TenantList", Actions: []string{"dynamodb:Scan"}, Resources: []*string{s.arn("dynamodb", "table", s.Names.Config())}}

	grants := map[string][]Grant{
		CommandAPI: {
			// BatchWriteItem: a members change writes its membership items in batches.
			{Sid: "Tables", Actions: []string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
				"dynamodb:DeleteItem", "dynamodb:ConditionCheckItem", "dynamodb:Query", "dynamodb:BatchWriteItem", "dynamodb:DescribeTable"},
				Resources: s.tables()},
			tenantList,
			// Provisioning marks a new write table, found empty by a Scan of one item, as
			// holding the member index from its first record (internal/dynamo, markMemberIndex).
			{Sid: "MemberIndexMark", Actions: []string{"dynamodb:Scan"}, Resources: []*string{
				s.arn("dynamodb", "table", s.Props.Prefix+"_*_user_commands")}},
			{Sid: "TenantTables", Actions: []string{"dynamodb:CreateTable", "dynamodb:TagResource", "dynamodb:DescribeTimeToLive",
				"dynamodb:UpdateTimeToLive"}, Resources: s.tenantTables()},
			{Sid: "TenantTablesBackups", Actions: []string{"dynamodb:DescribeContinuousBackups", "dynamodb:UpdateContinuousBackups"},
				Resources: s.tenantTables(), Reason: reasonBackups},
			{Sid: "TenantTablesDrop", Actions: []string{"dynamodb:UpdateTable", "dynamodb:DeleteTable"},
				Resources: s.tenantTables(), Reason: reasonDrop},
			{Sid: "Secrets", Actions: []string{"kms:GenerateDataKey", "kms:Decrypt"}, Resources: []*string{secretsKey}},
			writeKey,
			{Sid: "TableKeyGrant", Actions: []string{"kms:CreateGrant"}, Resources: []*string{key},
				Conditions: mergeConditions(s.viaService("dynamodb"), map[string]any{"Bool": map[string]any{"kms:GrantIsForAWSResource": "true"}}),
				Reason:     reasonTableKeyGrant},
			{Sid: "IdempotencyKey", Actions: []string{"secretsmanager:GetSecretValue"}, Resources: []*string{s.IdempotencyKey.SecretArn()}},
			{Sid: "ScimTokenKey", Actions: []string{"secretsmanager:GetSecretValue"}, Resources: []*string{s.ScimTokenKey.SecretArn()}},
			webhookKey,
			secretKey,
			// Provisioning in Lambda mode (SSO_LAMBDA_*) creates each new tenant's mappings and
			// removes them with its tables (internal/mappings; test/e2e/lambda_test.go records them).
			{Sid: "Mappings", Actions: []string{"lambda:CreateEventSourceMapping", "lambda:DeleteEventSourceMapping"},
				Resources:  []*string{jsii.String("*")},
				Conditions: map[string]any{"ArnEquals": map[string]any{"lambda:FunctionArn": consumers}}, Reason: reasonMappingsDrop},
			{Sid: "MappingsList", Actions: []string{"lambda:ListEventSourceMappings"}, Resources: []*string{jsii.String("*")}},
			// A mapping an older version made (its failure destination the shared queue an
			// upgrade deletes) is updated to this version's settings by provisioning and by
			// check-mappings (internal/mappings/update.go; test/e2e/lambda_upgrade_test.go).
			{Sid: "MappingsUpdate", Actions: []string{"lambda:UpdateEventSourceMapping"},
				Resources:  []*string{jsii.String("*")},
				Conditions: map[string]any{"ArnEquals": map[string]any{"lambda:FunctionArn": consumers}}},
			// The stage's table count (the TableQuota alarm): ListTables has no resource to scope.
			{Sid: "TableCount", Actions: []string{"dynamodb:ListTables"}, Resources: []*string{jsii.String("*")}},
			logs(CommandAPI),
		},
		QueryAPI: {
			{Sid: "Tables", Actions: []string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:DescribeTable"}, Resources: s.tables()},
			{Sid: "CursorKey", Actions: []string{"secretsmanager:GetSecretValue"}, Resources: []*string{s.CursorKey.SecretArn()}},
			// GET /access-report reads the tenant's read table whole, page by page
			// (internal/asof, report.go): its current generation or a replay's.
			{Sid: "AccessReport", Actions: []string{"dynamodb:Scan"}, Resources: []*string{
				s.arn("dynamodb", "table", s.Props.Prefix+"_*_users"), s.arn("dynamodb", "table", s.Props.Prefix+"_*_users_r*")},
				Reason: reasonAccessReport},
			readKey, secretKey, logs(QueryAPI),
		},
		Projector: {
			{Sid: "Tables", Actions: []string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
				"dynamodb:ConditionCheckItem", "dynamodb:Query", "dynamodb:BatchWriteItem", "dynamodb:DescribeTable"},
				Resources: s.tables()},
			tenantList,
			// An erasure scans a tenant's write table when it predates the member index
			// (no mark) and the Idempotency-Key records (no index by tenant), and the member
			// index's backfill scans such a write table once (internal/memberindex): docs/erasure.md.
			{Sid: "ErasureScan", Actions: []string{"dynamodb:Scan"}, Resources: []*string{
				s.arn("dynamodb", "table", s.Props.Prefix+"_*_user_commands"), s.arn("dynamodb", "table", s.Names.Idempotency()),
				// Once per stage: the ledger's entries written before their id items.
				s.arn("dynamodb", "table", s.Names.Erasures())}},
			streams,
			{Sid: "StreamsList", Actions: []string{"dynamodb:ListStreams"}, Resources: []*string{jsii.String("*")}, Reason: reasonStreamsLambda},
			webhookKey, secretKey, writeKey, logs(Projector),
		},
		KeycloakSync: {
			{Sid: "Tables", Actions: []string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
				"dynamodb:DeleteItem", "dynamodb:Query", "dynamodb:DescribeTable"}, Resources: s.tables()},
			tenantList,
			streams,
			{Sid: "StreamsList", Actions: []string{"dynamodb:ListStreams"}, Resources: []*string{jsii.String("*")}, Reason: reasonStreamsLambda},
			{Sid: "Secrets", Actions: []string{"kms:Decrypt"}, Resources: []*string{secretsKey}},
			writeKey, logs(KeycloakSync),
		},
	}
	for _, c := range Consumers {
		grants[c] = append(grants[c], failures(c)...)
	}
	if s.Props.EventBus != "" {
		grants[Projector] = append(grants[Projector], Grant{Sid: "EventBus", Actions: []string{"events:PutEvents"},
			Resources: []*string{s.eventBusARN()}})
	}
	s.Grants = grants
	for _, service := range Services {
		role := s.Functions[service].Role()
		for _, g := range s.Grants[service] {
			st := awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid:       jsii.String(g.Sid),
				Effect:    awsiam.Effect_ALLOW,
				Actions:   jsii.Strings(g.Actions...),
				Resources: &g.Resources,
			})
			if g.Conditions != nil {
				st.AddConditions(&g.Conditions)
			}
			role.AddToPrincipalPolicy(st)
		}
	}
}

func mergeConditions(ms ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}
