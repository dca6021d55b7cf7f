package dynamo_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
)

// createTableFront stands before DynamoDB Local and answers CreateTable calls with answer
// (counting them), passing every other call through.
func createTableFront(t *testing.T, answer func(n int64, w http.ResponseWriter, r *http.Request, pass http.Handler)) (*dynamodb.Client, *atomic.Int64) {
	t.Helper()
	local := dynamotest.Current(t)
	target, err := url.Parse(local.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	pass := httputil.NewSingleHostReverseProxy(target)
	var creates atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".CreateTable") {
			pass.ServeHTTP(w, r)
			return
		}
		answer(creates.Add(1), w, r, pass)
	}))
	t.Cleanup(front.Close)
	db := dynamodb.NewFromConfig(local.AWSConfig(), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(front.URL)
		o.DisableValidateResponseChecksum = true
	})
	return db, &creates
}

// A CreateTable whose answer is cut by a connection reset (ci on 8bd911e: "deserialization
// failed, read tcp …: use of closed network connection") is asked again; the table was
// made, so the second ask answers ResourceInUseException, which is success.
func TestCreateTableAsksAgainWhenTheConnectionIsResetMidAnswer(t *testing.T) {
	db, creates := createTableFront(t, func(n int64, w http.ResponseWriter, r *http.Request, pass http.Handler) {
		if n > 1 {
			pass.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		pass.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK {
			t.Errorf("DynamoDB Local's first CreateTable: %d %s", rec.Code, rec.Body)
		}
		body := rec.Body.Bytes()
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: %d\r\n\r\n", len(body))
		_, _ = buf.Write(body[:len(body)/2])
		_ = buf.Flush()
		if tcp, ok := conn.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0) // a reset, not an orderly close
		}
		_ = conn.Close()
	})
	names := dynamo.Names{Prefix: dynamotest.UniqueName("cut")}
	spec := dynamo.ConfigTable(names.Config())
	t.Cleanup(func() { _ = dynamo.DeleteTable(context.Background(), dynamotest.Current(t).DynamoDB(), names.Config()) })
	if err := dynamo.CreateTable(t.Context(), db, spec); err != nil {
		t.Fatalf("CreateTable after a reset answer: %v", err)
	}
	if got := creates.Load(); got != 2 {
		t.Fatalf("%d CreateTable calls, want 2 (the cut one and its retry)", got)
	}
	if _, err := dynamotest.Current(t).DynamoDB().DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(names.Config())}); err != nil {
		t.Fatalf("the table: %v", err)
	}
}

// A LimitExceededException is asked once: the SDK would retry it as throttling, but
// CreateTable tells the quota from "later" and its caller paces its own asks.
func TestCreateTableDoesNotRetryALimit(t *testing.T) {
	db, creates := createTableFront(t, func(_ int64, w http.ResponseWriter, r *http.Request, _ http.Handler) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.Copy(w, bytes.NewBufferString(`{"__type":"com.amazonaws.dynamodb.v20120810#LimitExceededException","message":"Subscriber limit exceeded: Only 10 tables can be created, updated, or deleted simultaneously"}`))
	})
	names := dynamo.Names{Prefix: dynamotest.UniqueName("limit")}
	err := dynamo.CreateTable(t.Context(), db, dynamo.ConfigTable(names.Config()))
	if !errors.Is(err, commands.ErrTablesLater) {
		t.Fatalf("CreateTable refused for now: %v, want ErrTablesLater", err)
	}
	if got := creates.Load(); got != 1 {
		t.Fatalf("%d CreateTable calls, want 1", got)
	}
}
