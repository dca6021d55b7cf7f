package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/dynamo"
)

// The four services, each one Lambda function (bin/lambda/<service>-arm64.zip).
const (
	CommandAPI   = "command-api"
	QueryAPI     = "query-api"
	Projector    = "projector"
	KeycloakSync = "keycloak-sync"
)

// Services are the functions of a stage, in a stable order.
var Services = []string{CommandAPI, QueryAPI, Projector, KeycloakSync}

// StageProps are what differs between stages.
type StageProps struct {
	// Stage names the stage (prod, stg, dev): the stack, the functions, the tags.
	Stage string
	// Prefix is SSO_TABLE_PREFIX (default mbcsso_<stage>, as the seed names tables).
	Prefix string
	// AssetDir holds <service>-arm64.zip, each with one executable `bootstrap`.
	AssetDir string
	// LogRetention is how long the functions' and APIs' logs are kept.
	LogRetention awslogs.RetentionDays
	// TableQuota is the account's DynamoDB table quota in the stage's region (0: AWS's
	// default, 2,500); an alarm warns at 80 % of it.
	TableQuota int
	// Concurrency is each function's reserved concurrency (default DefaultConcurrency).
	Concurrency map[string]int
	// EventBus is the Amazon EventBridge bus (a name in the stage's account and region, or
	// an ARN) every change also goes to (-c event-bus=…; SSO_EVENTBRIDGE_BUS): the projector
	// publishes to it on a schedule and may call events:PutEvents on it, nothing else.
	// Empty: none.
	EventBus string
	Env      *awscdk.Environment
}

// Names of two stages must never overlap: a stage's roles reach its tables by the pattern
// <prefix>_*, its alarms by ssodir-<stage>-*. A stage name has no separator ('-', '_') and
// a prefix exactly one '_' between two words, so one stage's pattern matches none of
// another's names (prod's mbcsso_prod_* would match mbcsso_prod_eu_…, the tables of a stage
// prod-eu, and its roles could delete them).
var (
	stageRE  = regexp.MustCompile(`^[a-z][a-z0-9]{0,15}$`)
	prefixRE = regexp.MustCompile(`^[a-z][a-z0-9]*_[a-z0-9]+$`)
	// eventBusRE is a bus's name or ARN (as SSO_EVENTBRIDGE_BUS takes it); not "default",
	// the account's own bus, which AWS services write to.
	eventBusRE = regexp.MustCompile(`^(arn:aws[a-z-]*:events:[a-z0-9-]+:[0-9]{12}:event-bus/[A-Za-z0-9/._-]{1,256}|[A-Za-z0-9._-]{1,256})$`)
)

func (p *StageProps) defaults() error {
	if !stageRE.MatchString(p.Stage) {
		return fmt.Errorf("stage %q: give -c stage=NAME, 1-16 lower-case letters and digits, starting with a letter (no '-' or '_': a stage's names must not start another's)", p.Stage)
	}
	if p.Prefix == "" {
		p.Prefix = "mbcsso_" + p.Stage
	}
	if !prefixRE.MatchString(p.Prefix) || len(p.Prefix) > 64 {
		return fmt.Errorf("prefix %q: two words of lower-case letters and digits joined by one '_' (mbcsso_prod), so that no stage's tables match another's pattern", p.Prefix)
	}
	if p.EventBus != "" && !eventBusRE.MatchString(p.EventBus) {
		return fmt.Errorf("event-bus %q: give an event bus name or an event bus ARN", p.EventBus)
	}
	if p.LogRetention == "" {
		p.LogRetention = awslogs.RetentionDays_THREE_MONTHS
	}
	if p.Concurrency == nil {
		p.Concurrency = map[string]int{}
	}
	for _, service := range Services {
		if _, ok := p.Concurrency[service]; !ok {
			p.Concurrency[service] = DefaultConcurrency[service]
		}
		if n := p.Concurrency[service]; n < 1 {
			return fmt.Errorf("concurrency of %s: %d, want at least 1", service, n)
		}
	}
	return nil
}

// DefaultConcurrency is each function's reserved concurrency: the consumers' is theirs
// whatever the APIs' load, the APIs' caps what a flood of requests can take. Together 800,
// under the 900 an account with the default quota of 1,000 may reserve (Lambda keeps 100
// unreserved). docs/aws.md, "Concurrency".
var DefaultConcurrency = map[string]int{Projector: 250, KeycloakSync: 250, CommandAPI: 100, QueryAPI: 200}

// dataRemoval keeps a resource that holds data (a table, a secret, a key, a log group) when
// it is deleted or replaced, but not when its stack's first creation fails and rolls back:
// the retry would fail on "already exists" (CloudFormation's RetainExceptOnCreate).
const dataRemoval = awscdk.RemovalPolicy_RETAIN_ON_UPDATE_OR_DELETE

// Stage is one stage's stack: what it made, for the tests and the alarms.
type Stage struct {
	Stack  awscdk.Stack
	Props  StageProps
	Names  dynamo.Names
	Tables map[string]awsdynamodb.Table
	// SecretsKey is SSO_KMS_KEY_ID: envelope encryption of passwords and Keycloak client
	// secrets. DataKey encrypts the data at rest: every table, the secrets in Secrets
	// Manager, the alarm topic.
	SecretsKey, DataKey awskms.Key
	CursorKey           awssecretsmanager.Secret
	IdempotencyKey      awssecretsmanager.Secret
	// WebhookKey is SSO_WEBHOOK_KEY: the command API and the projector encrypt and read the
	// webhooks' secrets with it (not with the passwords' key, which the projector never holds).
	WebhookKey awssecretsmanager.Secret
	// ScimTokenKey is SSO_SCIM_TOKEN_KEY: the HMAC key under which SCIM tokens are stored.
	ScimTokenKey awssecretsmanager.Secret
	Functions    map[string]awslambda.Function
	LogGroups    map[string]awslogs.LogGroup
	// AlarmTopic is where every alarm goes.
	AlarmTopic awssns.Topic
	// FailureQueues are each consumer's failure destination (projector, keycloak-sync): what
	// its stream mappings gave up on, read by the consumer itself (esm.Recovery). One queue
	// per consumer: an SQS message reaches only one.
	FailureQueues map[string]awssqs.Queue
	// Grants are the statements of each function's role, with why each is there.
	Grants map[string][]Grant
	// APIs are the two HTTP APIs, by service; their URLs end in "/".
	APIs                 map[string]awsapigatewayv2.HttpApi
	CommandURL, QueryURL *string
}

// NewStage builds one stage's stack.
func NewStage(scope constructs.Construct, props StageProps) (*Stage, error) {
	if err := props.defaults(); err != nil {
		return nil, err
	}
	stack := awscdk.NewStack(scope, jsii.String("ssodir-"+props.Stage), &awscdk.StackProps{
		Env:         props.Env,
		Description: jsii.String("ssodir stage " + props.Stage + ": four Lambda functions, their APIs, schedules, keys, system tables and alarms (deploy/)"),
	})
	awscdk.Tags_Of(stack).Add(jsii.String(dynamo.TagStage), jsii.String(props.Stage), nil)
	s := &Stage{Stack: stack, Props: props, Names: dynamo.Names{Prefix: props.Prefix},
		Tables: map[string]awsdynamodb.Table{}, Functions: map[string]awslambda.Function{},
		LogGroups: map[string]awslogs.LogGroup{}, APIs: map[string]awsapigatewayv2.HttpApi{}, Grants: map[string][]Grant{},
		FailureQueues: map[string]awssqs.Queue{}}
	s.keys()
	s.systemTables()
	s.secrets()
	params := s.parameters()
	if err := s.functions(params); err != nil {
		return nil, err
	}
	s.policies()
	s.apis()
	s.schedules()
	s.alarms()
	s.suppressions()
	return s, nil
}

func (s *Stage) keys() {
	s.SecretsKey = awskms.NewKey(s.Stack, jsii.String("SecretsKey"), &awskms.KeyProps{
		Description:       jsii.String("ssodir " + s.Props.Stage + ": SSO_KMS_KEY_ID, envelope encryption of passwords and Keycloak client secrets"),
		Alias:             jsii.String("alias/ssodir-" + s.Props.Stage + "-secrets"),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     dataRemoval,
	})
	s.DataKey = awskms.NewKey(s.Stack, jsii.String("DataKey"), &awskms.KeyProps{
		Description:       jsii.String("ssodir " + s.Props.Stage + ": encryption at rest of every table, the secrets in Secrets Manager and the alarm topic"),
		Alias:             jsii.String("alias/ssodir-" + s.Props.Stage + "-data"),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     dataRemoval,
	})
}

// systemTables are the tables every tenant shares, made by the stack (the services run
// with SSO_SYSTEM_TABLES=existing). Their keys come from internal/dynamo, the code that
// reads and writes them, so the stack cannot drift from it.
func (s *Stage) systemTables() {
	specs := []dynamo.TableSpec{
		dynamo.ConfigTable(s.Names.Config()),
		dynamo.IdempotencyTable(s.Names.Idempotency()),
		dynamo.ScimTokensTable(s.Names.ScimTokens()),
		dynamo.KeycloakSyncStatusTable(s.Names.KeycloakSyncStatus()),
		dynamo.ErasuresTable(s.Names.Erasures()),
		changefeed.Table(changefeed.TableName(s.Names)),
	}
	specs = append(specs, dynamo.StreamTables(s.Names.StreamLeases(), s.Names.DeadLetters())...)
	for _, spec := range specs {
		name := aws.ToString(spec.Input.TableName)
		id := strings.TrimPrefix(name, s.Props.Prefix+"_")
		props := &awsdynamodb.TableProps{
			TableName:   jsii.String(name),
			BillingMode: awsdynamodb.BillingMode_PAY_PER_REQUEST,
			PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
				PointInTimeRecoveryEnabled: jsii.Bool(true),
			},
			// No deletion protection on the stack's own tables: CloudFormation could not
			// delete a table of a failed first creation, and the stack would be stuck in
			// ROLLBACK_FAILED. The deletion policy keeps them on a stack's deletion or update.
			Encryption:    awsdynamodb.TableEncryption_CUSTOMER_MANAGED,
			EncryptionKey: s.DataKey,
			RemovalPolicy: dataRemoval,
		}
		for _, k := range spec.Input.KeySchema {
			attr := &awsdynamodb.Attribute{Name: k.AttributeName, Type: attributeType(spec.Input.AttributeDefinitions, aws.ToString(k.AttributeName))}
			if k.KeyType == types.KeyTypeHash {
				props.PartitionKey = attr
			} else {
				props.SortKey = attr
			}
		}
		if spec.TTLAttr != "" {
			props.TimeToLiveAttribute = jsii.String(spec.TTLAttr)
		}
		s.Tables[name] = awsdynamodb.NewTable(s.Stack, jsii.String("Table_"+id), props)
	}
}

func attributeType(defs []types.AttributeDefinition, name string) awsdynamodb.AttributeType {
	for _, d := range defs {
		if aws.ToString(d.AttributeName) == name && d.AttributeType == types.ScalarAttributeTypeN {
			return awsdynamodb.AttributeType_NUMBER
		}
	}
	return awsdynamodb.AttributeType_STRING
}

// secrets are the keys the services read from Secrets Manager at start (the environment
// names the secret, never holds it). Each is 44 random letters and digits: valid base64
// of 33 bytes (262 bits), as SSO_CURSOR_KEY, SSO_IDEMPOTENCY_KEY and SSO_SCIM_TOKEN_KEY
// want at least 32.
func (s *Stage) secrets() {
	generate := &awssecretsmanager.SecretStringGenerator{
		PasswordLength:     jsii.Number(44),
		ExcludePunctuation: jsii.Bool(true),
		IncludeSpace:       jsii.Bool(false),
	}
	s.CursorKey = awssecretsmanager.NewSecret(s.Stack, jsii.String("CursorKey"), &awssecretsmanager.SecretProps{
		SecretName:           jsii.String("ssodir/" + s.Props.Stage + "/cursor-key"),
		Description:          jsii.String("SSO_CURSOR_KEY: the query API's key for signing cursors"),
		GenerateSecretString: generate,
		EncryptionKey:        s.DataKey,
		RemovalPolicy:        dataRemoval,
	})
	s.IdempotencyKey = awssecretsmanager.NewSecret(s.Stack, jsii.String("IdempotencyKey"), &awssecretsmanager.SecretProps{
		SecretName:           jsii.String("ssodir/" + s.Props.Stage + "/idempotency-key"),
		Description:          jsii.String("SSO_IDEMPOTENCY_KEY: the command API's key for fingerprinting Idempotency-Key requests"),
		GenerateSecretString: generate,
		EncryptionKey:        s.DataKey,
		RemovalPolicy:        dataRemoval,
	})
	s.WebhookKey = awssecretsmanager.NewSecret(s.Stack, jsii.String("WebhookKey"), &awssecretsmanager.SecretProps{
		SecretName:           jsii.String("ssodir/" + s.Props.Stage + "/webhook-key"),
		Description:          jsii.String("SSO_WEBHOOK_KEY: the key of the webhooks' secrets (command API and projector)"),
		GenerateSecretString: generate,
		EncryptionKey:        s.DataKey,
		RemovalPolicy:        dataRemoval,
	})
	s.ScimTokenKey = awssecretsmanager.NewSecret(s.Stack, jsii.String("ScimTokenKey"), &awssecretsmanager.SecretProps{
		SecretName:           jsii.String("ssodir/" + s.Props.Stage + "/scim-token-key"),
		Description:          jsii.String("SSO_SCIM_TOKEN_KEY: the command API's key for the HMAC under which SCIM tokens are stored"),
		GenerateSecretString: generate,
		EncryptionKey:        s.DataKey,
		RemovalPolicy:        dataRemoval,
	})
}

type parameters struct {
	issuer, audience, consoleClient *string
}

func (s *Stage) parameters() parameters {
	issuer := awscdk.NewCfnParameter(s.Stack, jsii.String("OidcIssuer"), &awscdk.CfnParameterProps{
		Type:           jsii.String("String"),
		Description:    jsii.String("SSO_OIDC_ISSUER: the OIDC issuer whose JWTs the APIs accept (https://keycloak.example.com/realms/admin)"),
		AllowedPattern: jsii.String(`^https://[^\s]+[^/]$`),
	})
	audience := awscdk.NewCfnParameter(s.Stack, jsii.String("OidcAudience"), &awscdk.CfnParameterProps{
		Type:           jsii.String("String"),
		Description:    jsii.String("SSO_OIDC_AUDIENCE: the audience the JWTs must name"),
		AllowedPattern: jsii.String(`^\S+$`),
	})
	console := awscdk.NewCfnParameter(s.Stack, jsii.String("ConsoleClientId"), &awscdk.CfnParameterProps{
		Type:        jsii.String("String"),
		Default:     jsii.String(""),
		Description: jsii.String("SSO_CONSOLE_CLIENT_ID: the public OIDC client the web console signs in with (empty: the console cannot sign in)"),
	})
	return parameters{issuer: issuer.ValueAsString(), audience: audience.ValueAsString(), consoleClient: console.ValueAsString()}
}

// Lambda-mode settings of the command API (docs/aws.md, "Lambda mode"): which functions
// provisioning creates event source mappings for, and where their failures go.
const (
	envProjectorARN    = "SSO_LAMBDA_PROJECTOR_ARN"
	envKeycloakSyncARN = "SSO_LAMBDA_KEYCLOAK_SYNC_ARN"
)

// envFailureARN is, by consumer, the setting that names its mappings' failure destination.
var envFailureARN = map[string]string{
	Projector:    "SSO_LAMBDA_PROJECTOR_FAILURE_DESTINATION_ARN",
	KeycloakSync: "SSO_LAMBDA_KEYCLOAK_SYNC_FAILURE_DESTINATION_ARN",
}

// Consumers are the functions fed by the tenants' streams, each with its failure queue.
var Consumers = []string{Projector, KeycloakSync}

type fnSpec struct {
	memory  float64
	timeout awscdk.Duration
	env     map[string]*string
}

func (s *Stage) functions(p parameters) error {
	common := map[string]*string{
		"SSO_TABLE_PREFIX":              jsii.String(s.Props.Prefix),
		"SSO_STAGE":                     jsii.String(s.Props.Stage),
		"SSO_LOG_LEVEL":                 jsii.String("info"),
		"SSO_SYSTEM_TABLES":             jsii.String("existing"),
		"SSO_TABLE_PITR":                jsii.String("true"),
		"SSO_TABLE_DELETION_PROTECTION": jsii.String("true"),
		"SSO_TABLE_KMS_KEY":             s.DataKey.KeyArn(),
	}
	api := map[string]*string{"SSO_OIDC_ISSUER": p.issuer, "SSO_OIDC_AUDIENCE": p.audience}
	specs := map[string]fnSpec{
		CommandAPI: {memory: 1024, timeout: awscdk.Duration_Seconds(jsii.Number(29)), env: merge(common, api, map[string]*string{
			"SSO_KMS_KEY_ID":                 s.SecretsKey.KeyArn(),
			"SSO_IDEMPOTENCY_KEY_SECRET_ARN": s.IdempotencyKey.SecretArn(),
			"SSO_SCIM_TOKEN_KEY_SECRET_ARN":  s.ScimTokenKey.SecretArn(),
			"SSO_WEBHOOK_KEY_SECRET_ARN":     s.WebhookKey.SecretArn(),
			// A tenant whose tables would pass the counted quota is refused before any is made.
			"SSO_TABLE_QUOTA": jsii.String(strconv.Itoa(s.tableQuota())),
		})},
		QueryAPI: {memory: 1024, timeout: awscdk.Duration_Seconds(jsii.Number(29)), env: merge(common, api, map[string]*string{
			"SSO_CURSOR_KEY_SECRET_ARN": s.CursorKey.SecretArn(),
			"SSO_CONSOLE_CLIENT_ID":     p.consoleClient,
		})},
		Projector: {memory: 1024, timeout: awscdk.Duration_Minutes(jsii.Number(2)), env: merge(common, map[string]*string{
			"SSO_ACTIVITY_RETENTION":     jsii.String("2160h"),
			"SSO_WEBHOOK_KEY_SECRET_ARN": s.WebhookKey.SecretArn(),
		})},
		KeycloakSync: {memory: 512, timeout: awscdk.Duration_Minutes(jsii.Number(10)), env: merge(common, map[string]*string{
			"SSO_KMS_KEY_ID": s.SecretsKey.KeyArn(),
		})},
	}
	if s.Props.EventBus != "" {
		specs[Projector].env["SSO_EVENTBRIDGE_BUS"] = jsii.String(s.Props.EventBus)
	}
	for _, name := range Services {
		spec := specs[name]
		zip := filepath.Join(s.Props.AssetDir, name+"-arm64.zip")
		logs := awslogs.NewLogGroup(s.Stack, jsii.String(id(name)+"Logs"), &awslogs.LogGroupProps{
			LogGroupName:  jsii.String("/aws/lambda/" + s.functionName(name)),
			Retention:     s.Props.LogRetention,
			RemovalPolicy: dataRemoval,
		})
		s.LogGroups[name] = logs
		s.Functions[name] = awslambda.NewFunction(s.Stack, jsii.String(id(name)), &awslambda.FunctionProps{
			FunctionName: jsii.String(s.functionName(name)),
			Description:  jsii.String("ssodir " + name + " (" + s.Props.Stage + ")"),
			Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
			Architecture: awslambda.Architecture_ARM_64(),
			Handler:      jsii.String("bootstrap"),
			Code:         awslambda.Code_FromAsset(jsii.String(zip), nil),
			MemorySize:   jsii.Number(spec.memory),
			Timeout:      spec.timeout,
			Environment:  &spec.env,
			LogGroup:     logs,
			Role:         s.role(name),
			// The consumers' concurrency is reserved, the APIs' capped (docs/aws.md).
			ReservedConcurrentExecutions: jsii.Number(float64(s.Props.Concurrency[name])),
		})
	}
	// The command API creates each new tenant's mappings to the two consumers.
	cmd := s.Functions[CommandAPI]
	cmd.AddEnvironment(jsii.String(envProjectorARN), s.Functions[Projector].FunctionArn(), nil)
	cmd.AddEnvironment(jsii.String(envKeycloakSyncARN), s.Functions[KeycloakSync].FunctionArn(), nil)
	s.failureQueues(specs)
	for _, c := range Consumers {
		cmd.AddEnvironment(jsii.String(envFailureARN[c]), s.FailureQueues[c].QueueArn(), nil)
	}
	return nil
}

// Settings of the failure queues' event source mappings (to the consumer's function).
const (
	failureBatchSize = 10
	// failureConcurrency bounds the invocations the queue's poller makes at once (SQS's
	// least is 2): a flood of failure records after an outage repairs tenants a few at a
	// time and leaves the consumer's reserved concurrency to its streams.
	failureConcurrency = 5
)

// failureQueues gives each consumer its own failure queue, which the consumer's stream
// mappings (made per tenant by the command API) send what they give up on to, and which an
// SQS event source mapping of the stack feeds back to the consumer (esm.Recovery: the
// projector marks the tenant for replay, keycloak-sync reconciles it at once). A message
// whose repair fails is reported back (ReportBatchItemFailures) and comes again.
func (s *Stage) failureQueues(specs map[string]fnSpec) {
	for _, c := range Consumers {
		timeout := *specs[c].timeout.ToSeconds(nil)
		q := awssqs.NewQueue(s.Stack, jsii.String(id(c)+"StreamFailures"), &awssqs.QueueProps{
			// Lambda's stream poller writes here what a batch it gave up on was (shard,
			// sequence numbers), not the records: they stay in the stream for 24 h.
			RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
			// At least the function's timeout (CloudFormation refuses less), six times it
			// as Lambda advises, so that a batch being handled is not handed out again.
			VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(6 * timeout)),
			Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
			EnforceSSL:        jsii.Bool(true),
		})
		s.FailureQueues[c] = q
		fn := s.Functions[c]
		esm := awslambda.NewEventSourceMapping(s.Stack, jsii.String(id(c)+"StreamFailuresMapping"), &awslambda.EventSourceMappingProps{
			Target:                  fn,
			EventSourceArn:          q.QueueArn(),
			BatchSize:               jsii.Number(failureBatchSize),
			ReportBatchItemFailures: jsii.Bool(true),
			MaxConcurrency:          jsii.Number(failureConcurrency),
		})
		// CloudFormation checks the role may read the queue when it creates the mapping.
		esm.Node().AddDependency(fn.Role())
	}
}

func (s *Stage) functionName(service string) string { return "ssodir-" + s.Props.Stage + "-" + service }

// id is a construct id: command-api → CommandApi.
func id(service string) string {
	var b strings.Builder
	for _, part := range strings.Split(service, "-") {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

func merge(maps ...map[string]*string) map[string]*string {
	out := map[string]*string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}
