package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
)

// requests records every DynamoDB request a client sends (operation and input), and
// answers the point-in-time recovery calls itself: DynamoDB Local has no backups (it
// answers UnknownOperationException), so the fake keeps each table's recovery state the
// way DynamoDB does — off until turned on, unavailable for the first calls when asked to.
type requests struct {
	mu    sync.Mutex
	calls []call
	pitr  map[string]bool
	// unavailable is how many UpdateContinuousBackups calls still fail with
	// ContinuousBackupsUnavailableException (a table whose backups are being set up).
	unavailable int
}

type call struct {
	op string
	in any
}

func newRequests() *requests { return &requests{pitr: map[string]bool{}} }

func (r *requests) client(t *testing.T) *dynamodb.Client {
	t.Helper()
	mw := middleware.InitializeMiddlewareFunc("requests", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		op := awsmiddleware.GetOperationName(ctx)
		r.mu.Lock()
		r.calls = append(r.calls, call{op: op, in: in.Parameters})
		defer r.mu.Unlock()
		switch p := in.Parameters.(type) {
		case *dynamodb.DescribeContinuousBackupsInput:
			status := types.PointInTimeRecoveryStatusDisabled
			if r.pitr[aws.ToString(p.TableName)] {
				status = types.PointInTimeRecoveryStatusEnabled
			}
			return middleware.InitializeOutput{Result: &dynamodb.DescribeContinuousBackupsOutput{ContinuousBackupsDescription: &types.ContinuousBackupsDescription{
				ContinuousBackupsStatus:        types.ContinuousBackupsStatusEnabled,
				PointInTimeRecoveryDescription: &types.PointInTimeRecoveryDescription{PointInTimeRecoveryStatus: status},
			}}}, middleware.Metadata{}, nil
		case *dynamodb.UpdateContinuousBackupsInput:
			if r.unavailable > 0 {
				r.unavailable--
				return middleware.InitializeOutput{}, middleware.Metadata{}, &types.ContinuousBackupsUnavailableException{Message: aws.String("Backups are being enabled for the table")}
			}
			r.pitr[aws.ToString(p.TableName)] = aws.ToBool(p.PointInTimeRecoverySpecification.PointInTimeRecoveryEnabled)
			return middleware.InitializeOutput{Result: &dynamodb.UpdateContinuousBackupsOutput{}}, middleware.Metadata{}, nil
		}
		r.mu.Unlock()
		out, md, err := next.HandleInitialize(ctx, in)
		r.mu.Lock()
		return out, md, err
	})
	local := dynamotest.Current(t)
	return dynamodb.NewFromConfig(local.AWSConfig(), func(o *dynamodb.Options) {
		o.DisableValidateResponseChecksum = true
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error { return s.Initialize.Add(mw, middleware.Before) })
	})
}

// of is the inputs of one operation on one table, in order.
func (r *requests) of(op, table string) []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []any
	for _, c := range r.calls {
		if c.op == op && tableOf(c.in) == table {
			out = append(out, c.in)
		}
	}
	return out
}

// sequence is the operations on one table, in order.
func (r *requests) sequence(table string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.calls {
		if tableOf(c.in) == table {
			out = append(out, c.op)
		}
	}
	return out
}

func tableOf(in any) string {
	switch p := in.(type) {
	case *dynamodb.CreateTableInput:
		return aws.ToString(p.TableName)
	case *dynamodb.DeleteTableInput:
		return aws.ToString(p.TableName)
	case *dynamodb.UpdateTableInput:
		return aws.ToString(p.TableName)
	case *dynamodb.DescribeTableInput:
		return aws.ToString(p.TableName)
	case *dynamodb.UpdateContinuousBackupsInput:
		return aws.ToString(p.TableName)
	case *dynamodb.DescribeContinuousBackupsInput:
		return aws.ToString(p.TableName)
	case *dynamodb.DescribeTimeToLiveInput:
		return aws.ToString(p.TableName)
	case *dynamodb.UpdateTimeToLiveInput:
		return aws.ToString(p.TableName)
	}
	return ""
}

func tags(in *dynamodb.CreateTableInput) map[string]string {
	out := map[string]string{}
	for _, t := range in.Tags {
		out[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return out
}

const stageKey = "arn:aws:kms:eu-west-1:123456789012:key/0b7c8f52-3d0a-4c7e-9a55-6f1e2d3c4b5a"

var stage = dynamo.TableSettings{Stage: "prod", PointInTimeRecovery: true, DeletionProtection: true, KMSKey: stageKey}

func provisioning(t *testing.T, store *dynamo.TenantStore, system, tenant string) {
	t.Helper()
	rec := commands.TenantRecord{System: system, ID: tenant, Status: commands.TenantProvisioning, CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if err := store.PutTenant(t.Context(), rec, 0); err != nil {
		t.Fatal(err)
	}
	if err := store.EnsureTables(t.Context(), system, tenant); err != nil {
		t.Fatal(err)
	}
}

func TestTenantTablesGetTheStagesSettingsAndDroppingTurnsDeletionProtectionOffFirst(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rec := newRequests()
	db := rec.client(t)
	names := dynamo.Names{Prefix: dynamotest.UniqueName("tset")}
	if err := dynamo.EnsureSharedTables(ctx, db, names, dynamo.TableSettings{}); err != nil {
		t.Fatal(err)
	}
	store := dynamo.NewTenantStore(db, names).WithTableSettings(stage)
	provisioning(t, store, "acme", "eu")
	tables := []string{names.Commands("acme", "eu"), names.Users("acme", "eu", 0), names.Activities("acme", "eu", 0)}

	for _, name := range tables {
		creates := rec.of("CreateTable", name)
		if len(creates) != 1 {
			t.Fatalf("%s: %d CreateTable requests, want 1", name, len(creates))
		}
		in := creates[0].(*dynamodb.CreateTableInput)
		if want := map[string]string{"ssodir:stage": "prod", "ssodir:system": "acme", "ssodir:tenant": "eu"}; fmt.Sprint(tags(in)) != fmt.Sprint(want) {
			t.Errorf("%s: tags %v, want %v", name, tags(in), want)
		}
		if sse := in.SSESpecification; sse == nil || !aws.ToBool(sse.Enabled) || sse.SSEType != types.SSETypeKms || aws.ToString(sse.KMSMasterKeyId) != stageKey {
			t.Errorf("%s: encryption %+v, want the stage's KMS key", name, sse)
		}
		// DynamoDB Local keeps and reports deletion protection, and enforces it.
		d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		if !aws.ToBool(d.Table.DeletionProtectionEnabled) {
			t.Errorf("%s: deletion protection is off", name)
		}
		if _, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}); err == nil {
			t.Fatalf("%s: a plain DeleteTable deleted a protected table", name)
		}
		if got := rec.of("UpdateContinuousBackups", name); len(got) != 1 {
			t.Errorf("%s: %d requests for point-in-time recovery, want 1", name, len(got))
		}
	}

	// Provisioning again (a resumed one) asks nothing twice: recovery is on already.
	if err := store.EnsureTables(ctx, "acme", "eu"); err != nil {
		t.Fatal(err)
	}
	for _, name := range tables {
		if got := rec.of("UpdateContinuousBackups", name); len(got) != 1 {
			t.Errorf("%s: %d requests for point-in-time recovery after a second provisioning, want 1", name, len(got))
		}
	}

	row, err := store.GetTenant(ctx, "acme", "eu")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.DropTenant(ctx, "acme", "eu", row.CreatedAt); err != nil {
		t.Fatal(err)
	}
	for _, name := range tables {
		seq := rec.sequence(name)
		update, last := slices.Index(seq, "UpdateTable"), len(seq)-1
		if update < 0 || seq[last] != "DeleteTable" || update > last {
			t.Errorf("%s: requests %v, want deletion protection turned off before the DeleteTable that worked", name, seq)
		} else if in := rec.of("UpdateTable", name)[0].(*dynamodb.UpdateTableInput); aws.ToBool(in.DeletionProtectionEnabled) || in.DeletionProtectionEnabled == nil {
			t.Errorf("%s: UpdateTable %+v does not turn deletion protection off", name, in)
		}
		_, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		var nf *types.ResourceNotFoundException
		if !errors.As(err, &nf) {
			t.Errorf("%s is still there after the drop (%v)", name, err)
		}
	}
}

func TestTablesWithoutSettingsAreAsBefore(t *testing.T) {
	t.Parallel()
	rec := newRequests()
	db := rec.client(t)
	names := dynamo.Names{Prefix: dynamotest.UniqueName("tnone")}
	if err := dynamo.EnsureSharedTables(t.Context(), db, names, dynamo.TableSettings{}); err != nil {
		t.Fatal(err)
	}
	provisioning(t, dynamo.NewTenantStore(db, names), "acme", "eu")
	name := names.Commands("acme", "eu")
	in := rec.of("CreateTable", name)[0].(*dynamodb.CreateTableInput)
	if in.Tags != nil || in.SSESpecification != nil || in.DeletionProtectionEnabled != nil {
		t.Errorf("CreateTable without settings asks for %v, %+v, %v", in.Tags, in.SSESpecification, in.DeletionProtectionEnabled)
	}
	if got := rec.sequence(name); slices.Contains(got, "UpdateContinuousBackups") || slices.Contains(got, "DescribeContinuousBackups") {
		t.Errorf("requests %v ask about backups", got)
	}
	// Without protection, a drop deletes at once.
	if err := dynamo.DeleteTable(t.Context(), db, name); err != nil {
		t.Fatal(err)
	}
	if got := rec.sequence(name); slices.Contains(got, "UpdateTable") {
		t.Errorf("requests %v turn off a protection that was not on", got)
	}
}

func TestPointInTimeRecoveryIsAskedAgainWhileTheTablesBackupsAreBeingSetUp(t *testing.T) {
	t.Parallel()
	rec := newRequests()
	rec.unavailable = 1
	db := rec.client(t)
	name := dynamotest.UniqueName("tpitr")
	spec := dynamo.ConfigTable(name).With(dynamo.TableSettings{PointInTimeRecovery: true}, "", "")
	if err := dynamo.EnsureTable(t.Context(), db, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dynamo.DeleteTable(context.Background(), db, name) })
	if got := rec.of("UpdateContinuousBackups", name); len(got) != 2 {
		t.Errorf("%d requests for point-in-time recovery, want 2 (one refused while unavailable, one that worked)", len(got))
	}
	if !rec.pitr[name] {
		t.Error("point-in-time recovery is off")
	}
}

func TestSystemTablesGetTheStageTagAndAreOnlyCheckedWhenTheStackMadeThem(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rec := newRequests()
	db := rec.client(t)
	names := dynamo.Names{Prefix: dynamotest.UniqueName("tsys")}
	t.Cleanup(func() {
		for _, n := range []string{names.Config(), names.Idempotency()} {
			_ = dynamo.DeleteTable(context.Background(), db, n)
		}
	})

	made := stage
	made.SystemTablesExist = true
	err := dynamo.EnsureSharedTables(ctx, db, names, made)
	if err == nil || !strings.Contains(err.Error(), names.Config()) {
		t.Fatalf("missing system tables the stack should have made: %v, want an error naming %s", err, names.Config())
	}
	if got := rec.of("CreateTable", names.Config()); len(got) != 0 {
		t.Fatalf("a process created a system table the stack makes")
	}

	if err := dynamo.EnsureSharedTables(ctx, db, names, stage); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{names.Config(), names.Idempotency()} {
		in := rec.of("CreateTable", name)[0].(*dynamodb.CreateTableInput)
		if want := map[string]string{"ssodir:stage": "prod"}; fmt.Sprint(tags(in)) != fmt.Sprint(want) {
			t.Errorf("%s: tags %v, want %v (a shared table belongs to no tenant)", name, tags(in), want)
		}
		if !aws.ToBool(in.DeletionProtectionEnabled) || in.SSESpecification == nil || len(rec.of("UpdateContinuousBackups", name)) != 1 {
			t.Errorf("%s: created without the stage's protection, key or recovery", name)
		}
	}
	if err := dynamo.EnsureSharedTables(ctx, db, names, made); err != nil {
		t.Errorf("system tables the stack made are there, yet: %v", err)
	}
}
