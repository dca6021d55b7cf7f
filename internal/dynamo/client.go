package dynamo

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
)

// Clients are the SDK clients of one process.
type Clients struct {
	DB      *dynamodb.Client
	Streams *dynamodbstreams.Client
	AWS     aws.Config
	// LocalStreams is true when the Streams endpoint is on this machine (DynamoDB Local),
	// which has none of AWS's per-shard GetRecords limits.
	LocalStreams bool
}

// NewClients builds clients from the SDK's standard configuration (region, credential
// chain), with the endpoint overrides given (empty: AWS); configure may add to the
// configuration every client of the process shares (a call recorder in tests).
func NewClients(ctx context.Context, dynamoEndpoint, streamsEndpoint string, configure ...func(*aws.Config)) (*Clients, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	tuneClient(&cfg)
	for _, f := range configure {
		f(&cfg)
	}
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if dynamoEndpoint != "" {
			o.BaseEndpoint = aws.String(dynamoEndpoint)
		}
		// DynamoDB Local sends no CRC32 header on errors; validating it there only drops
		// connections. Against AWS the check stays on.
		o.DisableValidateResponseChecksum = isLoopback(dynamoEndpoint)
	})
	st := dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) {
		if streamsEndpoint != "" {
			o.BaseEndpoint = aws.String(streamsEndpoint)
		}
	})
	return &Clients{DB: db, Streams: st, AWS: cfg, LocalStreams: isLoopback(streamsEndpoint)}, nil
}

// maxIdleConnsPerHost keeps a connection for every request in flight: the SDK's default
// (10) closes and redials connections as soon as more than ten calls to DynamoDB overlap
// (a query API at c=32, a projector writing aggregates in parallel), and each redial is a
// TCP (on AWS, TLS) handshake on the request's path.
const maxIdleConnsPerHost = 256

// tuneClient sets the HTTP transport and retryer every client of the process shares.
// Retries keep the standard mode (3 attempts, exponential backoff with jitter) but without
// the client-side retry token bucket: that bucket fails calls outright ("retry quota
// exceeded") after a burst of throttling, when backing off and trying again is what a
// projector or a command must do; and it is a mutex on every attempt's path.
func tuneClient(cfg *aws.Config) {
	cfg.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConns = 4 * maxIdleConnsPerHost
		tr.MaxIdleConnsPerHost = maxIdleConnsPerHost
	})
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = ratelimit.None })
	}
}

func isLoopback(endpoint string) bool {
	if endpoint == "" {
		return false
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Ping checks that DynamoDB answers (for /readyz).
func Ping(ctx context.Context, db *dynamodb.Client, table string) error {
	_, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("describe %s: %w", table, translate(err))
	}
	return nil
}
