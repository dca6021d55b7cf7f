// Package lambdafn runs an ssodir process as an AWS Lambda function: one handler for every
// event the function is wired to, dispatched by shape —
//   - an API Gateway HTTP API or Function URL request (payload 2.0) goes to the process's
//     echo router through aws-lambda-go-api-proxy's echo adapter: same routes, same auth,
//     same problem responses as the long-running binary;
//   - a DynamoDB stream batch from an event source mapping goes to internal/esm;
//   - an SQS batch from the mappings' failure destination (records ESM gave up on) goes to
//     esm.Recovery, which repairs the tenant;
//   - a scheduled event {"ssodir_task": NAME} runs the task that the long-running process
//     runs on a timer (a function is frozen between invocations, so it has no timers).
//
// It decides nothing itself: it is a port over what the long-running binaries use.
package lambdafn

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	echoadapter "github.com/awslabs/aws-lambda-go-api-proxy/echo"
	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/esm"
)

// TaskKey is the field of a scheduled event's constant input that names the task
// (deploy/'s schedules).
const TaskKey = "ssodir_task"

// Function is what one function answers; the zero fields are events it does not take.
type Function struct {
	HTTP   *echo.Echo
	Stream *esm.Batch
	// Discards reads the consumer's failure destination.
	Discards *esm.Recovery
	Tasks    map[string]func(ctx context.Context) error
	Log      *zap.Logger

	http *echoadapter.EchoLambdaV2
}

// shape is enough of an event to tell what it is.
type shape struct {
	Records []struct {
		EventSource string `json:"eventSource"`
	} `json:"Records"`
	Task           string          `json:"ssodir_task"`
	Version        string          `json:"version"`
	RequestContext json.RawMessage `json:"requestContext"`
}

// Invoke implements lambda.Handler.
func (f *Function) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	var s shape
	if err := json.Unmarshal(payload, &s); err != nil {
		return nil, fmt.Errorf("the event is not JSON: %w", err)
	}
	switch {
	case len(s.Records) > 0 && s.Records[0].EventSource == "aws:dynamodb" && f.Stream != nil:
		var ev events.DynamoDBEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, fmt.Errorf("decode the DynamoDB stream event: %w", err)
		}
		resp, err := f.Stream.Handle(ctx, ev)
		if err != nil {
			return nil, err
		}
		return json.Marshal(resp)
	case len(s.Records) > 0 && s.Records[0].EventSource == "aws:sqs" && f.Discards != nil:
		var ev events.SQSEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, fmt.Errorf("decode the SQS event: %w", err)
		}
		resp, err := f.Discards.Handle(ctx, ev)
		if err != nil {
			return nil, err
		}
		return json.Marshal(resp)
	case s.Task != "":
		task, ok := f.Tasks[s.Task]
		if !ok {
			if len(f.Tasks) == 0 {
				return nil, fmt.Errorf("unknown task %q: this function runs no scheduled task", s.Task)
			}
			return nil, fmt.Errorf("unknown task %q (this function runs: %s)", s.Task, strings.Join(f.taskNames(), ", "))
		}
		if err := task(ctx); err != nil {
			f.Log.Error("task failed", zap.String("task", s.Task), zap.Error(err))
			return nil, fmt.Errorf("task %s: %w", s.Task, err)
		}
		return json.Marshal(map[string]string{"task": s.Task, "outcome": "done"})
	case s.Version == "2.0" && len(s.RequestContext) > 0 && f.HTTP != nil:
		var req events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, fmt.Errorf("decode the HTTP request event: %w", err)
		}
		if resp, ok := notServed(req); ok {
			return json.Marshal(resp)
		}
		if f.http == nil {
			f.http = echoadapter.NewV2(f.HTTP)
		}
		resp, err := f.http.ProxyWithContext(ctx, req)
		if err != nil {
			return nil, err
		}
		return json.Marshal(resp)
	}
	return nil, fmt.Errorf("this function does not take this event (neither %s)", strings.Join(f.kinds(), " nor "))
}

func (f *Function) taskNames() []string {
	var names []string
	for n := range f.Tasks {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (f *Function) kinds() []string {
	var k []string
	if f.HTTP != nil {
		k = append(k, "an HTTP API request (payload 2.0)")
	}
	if f.Stream != nil {
		k = append(k, "a DynamoDB stream batch")
	}
	if f.Discards != nil {
		k = append(k, "an SQS batch of the failure destination")
	}
	if len(f.Tasks) > 0 {
		k = append(k, `{"ssodir_task": ...}`)
	}
	return k
}

// Start serves invocations until the runtime stops the process; it does not return.
func Start(f *Function) {
	if f.Log == nil {
		f.Log = zap.NewNop()
	}
	lambda.Start(f)
}
