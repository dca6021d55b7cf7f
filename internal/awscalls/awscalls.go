// Package awscalls records every AWS operation a process makes, as the IAM action it needs
// and the resource it touched, so that tests can hold the stage's policies (deploy/) to
// what the code really does: every recorded call must be allowed, and every allowed
// action must have been recorded or carry a written reason.
//
// A Recorder is an SDK middleware attached to the process's aws.Config; it is on only when
// SSO_AWS_CALL_LOG names a directory (tests). Each process appends its distinct calls, one
// JSON object a line, to its own file there, at once, so a process killed mid-test loses
// nothing it recorded.
package awscalls

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/smithy-go/middleware"
)

// Placeholders in recorded ARNs: a test's region, account and table prefix are not the
// stage's, so a recorded resource names them by these, and a checker puts the stage's in.
const (
	Partition = "${AWS::Partition}"
	Region    = "${AWS::Region}"
	Account   = "${AWS::AccountId}"
	Prefix    = "${Prefix}"
)

// Call is one distinct AWS operation of a process, as IAM authorises it.
type Call struct {
	// Service is the ssodir process (command-api, query-api, projector, keycloak-sync).
	Service string `json:"service"`
	// Operation is the SDK operation (TransactWriteItems); Action the IAM action it needs
	// on Resource (dynamodb:PutItem): a transaction is recorded once per action and table.
	Operation string `json:"operation"`
	Action    string `json:"action"`
	// Resource is an ARN with the placeholders above, or "*" for actions IAM authorises on
	// no resource (ListStreams, CreateEventSourceMapping).
	Resource string `json:"resource"`
	// Context holds the condition keys IAM evaluates for the call (lambda:FunctionArn).
	Context map[string]string `json:"context,omitempty"`
}

func (c Call) key() string {
	keys := make([]string, 0, len(c.Context))
	for k, v := range c.Context {
		keys = append(keys, k+"="+v)
	}
	slices.Sort(keys)
	return c.Operation + " " + c.Action + " " + c.Resource + " " + strings.Join(keys, ",")
}

// Recorder records one process's calls into a file of its own.
type Recorder struct {
	service string
	prefix  string

	mu   sync.Mutex
	file *os.File
	seen map[string]bool
	// streams maps a shard iterator to the stream it reads: GetRecords names only the
	// iterator, IAM authorises it on the stream. Iterators stay (a consumer may read one
	// again after a failed read) until maxIterators, when the map starts afresh.
	streams map[string]string
}

const maxIterators = 200_000

// New is a recorder for a process of service whose tables start with prefix, writing into
// dir (created if missing).
func New(dir, service, prefix string) (*Recorder, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("aws call log: %w", err)
	}
	f, err := os.CreateTemp(dir, service+"-*.jsonl")
	if err != nil {
		return nil, fmt.Errorf("aws call log: %w", err)
	}
	return &Recorder{service: service, prefix: prefix, file: f, seen: map[string]bool{}, streams: map[string]string{}}, nil
}

// Attach records every call of every client made from cfg from now on.
func (r *Recorder) Attach(cfg *aws.Config) {
	cfg.APIOptions = append(cfg.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("ssodirRecordCalls", r.handle), middleware.Before)
	})
}

// Close closes the file.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.file.Close()
}

func (r *Recorder) handle(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	service, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
	out, md, err := next.HandleInitialize(ctx, in)
	// A call is recorded whatever its outcome: a refused call was still asked for, and
	// the policy must allow what the code asks (a CreateTable answered "in use" included).
	calls := r.calls(service, op, in.Parameters, out.Result)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range calls {
		c.Service, c.Operation = r.service, op
		if k := c.key(); !r.seen[k] {
			r.seen[k] = true
			line, _ := json.Marshal(c)
			_, _ = r.file.Write(append(line, '\n'))
		}
	}
	return out, md, err
}

// calls is what IAM authorises for one operation.
func (r *Recorder) calls(service, op string, in, out any) []Call {
	switch p := in.(type) {
	case *dynamodb.TransactWriteItemsInput:
		var calls []Call
		for _, it := range p.TransactItems {
			switch {
			case it.Put != nil:
				calls = append(calls, r.table("dynamodb:PutItem", aws.ToString(it.Put.TableName), ""))
			case it.Update != nil:
				calls = append(calls, r.table("dynamodb:UpdateItem", aws.ToString(it.Update.TableName), ""))
			case it.Delete != nil:
				calls = append(calls, r.table("dynamodb:DeleteItem", aws.ToString(it.Delete.TableName), ""))
			case it.ConditionCheck != nil:
				calls = append(calls, r.table("dynamodb:ConditionCheckItem", aws.ToString(it.ConditionCheck.TableName), ""))
			}
		}
		return calls
	case *dynamodb.TransactGetItemsInput:
		var calls []Call
		for _, it := range p.TransactItems {
			calls = append(calls, r.table("dynamodb:GetItem", aws.ToString(it.Get.TableName), ""))
		}
		return calls
	case *dynamodb.BatchWriteItemInput:
		var calls []Call
		for name := range p.RequestItems {
			calls = append(calls, r.table("dynamodb:BatchWriteItem", name, ""))
		}
		return calls
	case *dynamodb.BatchGetItemInput:
		var calls []Call
		for name := range p.RequestItems {
			calls = append(calls, r.table("dynamodb:BatchGetItem", name, ""))
		}
		return calls
	case *dynamodb.CreateTableInput:
		calls := []Call{r.table("dynamodb:CreateTable", aws.ToString(p.TableName), "")}
		if len(p.Tags) > 0 {
			// Tags given at creation are authorised as dynamodb:TagResource too.
			calls = append(calls, r.table("dynamodb:TagResource", aws.ToString(p.TableName), ""))
		}
		return calls
	case *dynamodbstreams.GetShardIteratorInput:
		stream := aws.ToString(p.StreamArn)
		if o, ok := out.(*dynamodbstreams.GetShardIteratorOutput); ok && o.ShardIterator != nil {
			r.mu.Lock()
			if len(r.streams) >= maxIterators {
				r.streams = map[string]string{}
			}
			r.streams[*o.ShardIterator] = stream
			r.mu.Unlock()
		}
		return []Call{r.arn("dynamodb:GetShardIterator", stream)}
	case *dynamodbstreams.GetRecordsInput:
		r.mu.Lock()
		stream, ok := r.streams[aws.ToString(p.ShardIterator)]
		if o, okOut := out.(*dynamodbstreams.GetRecordsOutput); okOut && ok && o.NextShardIterator != nil {
			if len(r.streams) >= maxIterators {
				r.streams = map[string]string{}
			}
			r.streams[*o.NextShardIterator] = stream
		}
		r.mu.Unlock()
		if !ok {
			stream = "unknown-stream (iterator not seen)"
		}
		return []Call{r.arn("dynamodb:GetRecords", stream)}
	case *eventbridge.PutEventsInput:
		// Authorised on each bus an entry names (the account's default bus when none).
		var calls []Call
		for _, e := range p.Entries {
			calls = append(calls, bus("events:"+op, aws.ToString(e.EventBusName)))
		}
		return calls
	}
	return []Call{r.generic(service, op, in, out)}
}

// iamPrefix is the IAM service prefix of an SDK service id.
func iamPrefix(service string) string {
	switch service {
	case "DynamoDB", "DynamoDB Streams":
		return "dynamodb"
	case "Secrets Manager":
		return "secretsmanager"
	case "EventBridge":
		return "events"
	}
	return strings.ToLower(strings.ReplaceAll(service, " ", ""))
}

// generic reads the resource from the input's usual fields.
func (r *Recorder) generic(service, op string, in, out any) Call {
	action := iamPrefix(service) + ":" + op
	switch {
	case op == "ListStreams" || op == "ListTables":
		// Authorised on no resource, whatever table the request names.
		return Call{Action: action, Resource: "*"}
	case field(in, "TableName") != "":
		return r.table(action, field(in, "TableName"), field(in, "IndexName"))
	case field(in, "StreamArn") != "":
		return r.arn(action, field(in, "StreamArn"))
	case field(in, "ResourceArn") != "":
		return r.arn(action, field(in, "ResourceArn"))
	case field(in, "KeyId") != "":
		return r.kms(action, field(in, "KeyId"))
	case field(in, "SecretId") != "":
		return r.arn(action, field(in, "SecretId"))
	}
	if iamPrefix(service) == "lambda" && strings.Contains(op, "EventSourceMapping") {
		// Mappings are authorised on "*" (create, list) or on the mapping, and all by the
		// function they feed: lambda:FunctionArn.
		c := Call{Action: action, Resource: "*"}
		fn := field(in, "FunctionName")
		if fn == "" {
			fn = field(out, "FunctionArn")
		}
		if fn != "" {
			c.Context = map[string]string{"lambda:FunctionArn": normalize(fn)}
		}
		if uuid := field(in, "UUID"); uuid != "" {
			c.Resource = "arn:" + Partition + ":lambda:" + Region + ":" + Account + ":event-source-mapping:" + uuid
		}
		return c
	}
	if f := field(in, "FunctionName"); f != "" {
		return r.arn(action, f)
	}
	// ListTables, ListStreams and the like act on no resource.
	return Call{Action: action, Resource: "*"}
}

func (r *Recorder) table(action, name, index string) Call {
	res := "arn:" + Partition + ":dynamodb:" + Region + ":" + Account + ":table/" + r.relative(name)
	if index != "" {
		res += "/index/" + index
	}
	return Call{Action: action, Resource: res}
}

func (r *Recorder) relative(name string) string {
	if strings.HasPrefix(name, r.prefix+"_") {
		return Prefix + strings.TrimPrefix(name, r.prefix)
	}
	return name
}

// arn records an ARN with its region and account replaced; a DynamoDB ARN's table name
// is made relative to the prefix.
func (r *Recorder) arn(action, arn string) Call {
	res := normalize(arn)
	if rest, ok := strings.CutPrefix(res, "arn:"+Partition+":dynamodb:"+Region+":"+Account+":table/"); ok {
		res = "arn:" + Partition + ":dynamodb:" + Region + ":" + Account + ":table/" + r.relative(rest)
	}
	return Call{Action: action, Resource: res}
}

// bus is an event bus's ARN, from its name or ARN.
func bus(action, nameOrARN string) Call {
	if strings.HasPrefix(nameOrARN, "arn:") {
		return Call{Action: action, Resource: normalize(nameOrARN)}
	}
	if nameOrARN == "" {
		nameOrARN = "default"
	}
	return Call{Action: action, Resource: "arn:" + Partition + ":events:" + Region + ":" + Account + ":event-bus/" + nameOrARN}
}

func (r *Recorder) kms(action, key string) Call {
	if strings.HasPrefix(key, "arn:") {
		return Call{Action: action, Resource: normalize(key)}
	}
	if strings.HasPrefix(key, "alias/") {
		return Call{Action: action, Resource: "arn:" + Partition + ":kms:" + Region + ":" + Account + ":" + key}
	}
	return Call{Action: action, Resource: "arn:" + Partition + ":kms:" + Region + ":" + Account + ":key/" + key}
}

// normalize replaces an ARN's partition, region and account by the placeholders.
func normalize(arn string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" {
		return arn
	}
	parts[1], parts[4] = Partition, Account
	if parts[3] != "" {
		parts[3] = Region
	}
	return strings.Join(parts, ":")
}

// field is a string (or *string) field of a struct pointer, "" if there is none.
func field(v any, name string) string {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return ""
	}
	f := rv.Elem().FieldByName(name)
	switch {
	case !f.IsValid():
		return ""
	case f.Kind() == reflect.String:
		return f.String()
	case f.Kind() == reflect.Pointer && !f.IsNil() && f.Elem().Kind() == reflect.String:
		return f.Elem().String()
	}
	return ""
}

// Read returns every call recorded in dir, by every process.
func Read(dir string) ([]Call, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	var calls []Call
	var errs []error
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var c Call
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				// A process killed while writing leaves at most a torn last line.
				continue
			}
			calls = append(calls, c)
		}
		errs = append(errs, sc.Err(), f.Close())
	}
	return calls, errors.Join(errs...)
}
