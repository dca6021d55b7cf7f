// Package dynamotest starts a private Amazon DynamoDB Local for a test package.
//
// DynamoDB Local gets slow when a stream table's first record comes after many records of
// other tables (see ../shared/DYNAMODB-LOCAL.md), so every test package gets a fresh
// in-memory instance of its own, started in TestMain and stopped when the package ends:
//
//	func TestMain(m *testing.M) { dynamotest.Main(m) }
//
// and tests take a client with dynamotest.Client(t) and unique names with UniqueName.
package dynamotest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/ssodir/ssodir/internal/testbin"
)

// Local is a running DynamoDB Local process.
type Local struct {
	Endpoint string
	cmd      *exec.Cmd
	done     chan struct{}
}

var current *Local

// Main starts DynamoDB Local, runs the package's tests and stops it again.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	l, err := Start(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "dynamotest:", err)
		return 1
	}
	current = l
	defer l.Stop()
	return m.Run()
}

// Current is the instance started by Main; tests fail if there is none.
func Current(t testing.TB) *Local {
	t.Helper()
	if current == nil {
		t.Fatal("dynamotest: no DynamoDB Local running; call dynamotest.Main from TestMain")
	}
	return current
}

// Private starts a DynamoDB Local of the test's own, stopped when the test ends. It is for a
// test that writes many stream records: on the package's instance it would run slowly once
// the tests before it wrote many records of other tables (../shared/DYNAMODB-LOCAL.md,
// trap 1), and slow down the tests after it in turn.
func Private(t testing.TB) *Local {
	t.Helper()
	l, err := Start(context.Background())
	if err != nil {
		t.Fatalf("dynamotest: %v", err)
	}
	t.Cleanup(l.Stop)
	return l
}

// Options are how an instance is started.
type Options struct {
	// FullJIT lets the JVM compile hot code with its optimizing compiler (C2), as a long
	// benchmark wants; without it only the first tier (C1) compiles. A test's instance lives
	// seconds to minutes, too short for C2's compilations to earn back their CPU on these
	// 2-core machines: measured on one instance, start-up took 3.5 s of CPU with C1 alone
	// against 6.5 s, and 3,000 writes and reads 5 s against 10 s (20,000 of each still 27 s
	// against 29 s).
	FullJIT bool
}

// Start installs DynamoDB Local if needed (through scripts/dynamodb-local.sh) and starts a
// fresh in-memory instance on a free loopback port, tuned for a test (Options).
func Start(ctx context.Context) (*Local, error) {
	return StartWith(ctx, Options{})
}

// StartWith is Start with the given options.
func StartWith(ctx context.Context, o Options) (*Local, error) {
	root, err := testbin.ModuleRoot()
	if err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, filepath.Join(root, "scripts", "dynamodb-local.sh"), "path").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("install DynamoDB Local: %s", strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, fmt.Errorf("install DynamoDB Local: %w", err)
	}
	dir := strings.TrimSpace(string(out))
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"-Xmx2g", "-XX:+UseSerialGC"}
	if !o.FullJIT {
		args = append(args, "-XX:TieredStopAtLevel=1")
	}
	args = append(args, "-Djava.library.path=./DynamoDBLocal_lib",
		"-jar", "DynamoDBLocal.jar", "-inMemory", "-disableTelemetry", "-port", fmt.Sprint(port))
	cmd := exec.Command("java", args...)
	cmd.Dir = dir
	// The JVM must not outlive a test binary that is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Getenv("DYNAMOTEST_VERBOSE") != "" {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start DynamoDB Local: %w", err)
	}
	l := &Local{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(l.done) }()
	if err := l.waitReady(ctx); err != nil {
		l.Stop()
		return nil, err
	}
	return l, nil
}

func (l *Local) waitReady(ctx context.Context) error {
	db := l.DynamoDB()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-l.done:
			return errors.New("DynamoDB Local exited during start-up (set DYNAMOTEST_VERBOSE=1 to see its output)")
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := db.ListTables(cctx, &dynamodb.ListTablesInput{})
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("DynamoDB Local did not answer within 60s")
}

// Stop ends the process.
func (l *Local) Stop() {
	if l.cmd.Process != nil {
		_ = l.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-l.done:
		case <-time.After(5 * time.Second):
			_ = l.cmd.Process.Kill()
			<-l.done
		}
	}
}

// AWSConfig is an SDK configuration for this instance (static dummy credentials; the access
// key must be letters and digits only).
func (l *Local) AWSConfig() aws.Config {
	return aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("dummy", "dummy", ""),
		BaseEndpoint: aws.String(l.Endpoint),
	}
}

// DynamoDB is a client for this instance.
func (l *Local) DynamoDB() *dynamodb.Client {
	return dynamodb.NewFromConfig(l.AWSConfig(), func(o *dynamodb.Options) {
		o.DisableValidateResponseChecksum = true
	})
}

// Streams is a DynamoDB Streams client for this instance.
func (l *Local) Streams() *dynamodbstreams.Client {
	return dynamodbstreams.NewFromConfig(l.AWSConfig())
}

// Env is the environment a child process needs to reach this instance.
func (l *Local) Env() []string {
	return []string{
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=dummy",
		"AWS_SECRET_ACCESS_KEY=dummy",
		"AWS_ENDPOINT_URL_DYNAMODB=" + l.Endpoint,
		"AWS_ENDPOINT_URL_DYNAMODB_STREAMS=" + l.Endpoint,
	}
}

var counter atomic.Int64

// UniqueName is a name no other test in this process uses, safe as a table prefix
// (letters, digits and underscores) or an id (lower case).
func UniqueName(base string) string {
	return fmt.Sprintf("%s%d%d", base, time.Now().UnixNano()%1_000_000, counter.Add(1))
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
