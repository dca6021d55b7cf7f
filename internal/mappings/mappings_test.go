package mappings_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/ssodir/ssodir/internal/mappings"
	"github.com/ssodir/ssodir/internal/mappings/mappingstest"
)

const (
	projectorARN   = "arn:aws:lambda:eu-west-1:123456789012:function:ssodir-prod-projector"
	syncARN        = "arn:aws:lambda:eu-west-1:123456789012:function:ssodir-prod-keycloak-sync"
	projectorQueue = "arn:aws:sqs:eu-west-1:123456789012:ssodir-prod-projector-stream-failures"
	syncQueue      = "arn:aws:sqs:eu-west-1:123456789012:ssodir-prod-keycloak-sync-stream-failures"
)

func client(f *mappingstest.Fake) *lambda.Client {
	return lambda.New(lambda.Options{Region: "eu-west-1", BaseEndpoint: aws.String(f.URL),
		Credentials: aws.AnonymousCredentials{}})
}

func streamARN(table string, label int) string {
	return fmt.Sprintf("arn:aws:dynamodb:eu-west-1:123456789012:table/%s/stream/2026-11-26T15:%02d:00.000", table, label)
}

func TestEveryTenantStreamGetsOneMappingPerFunctionWithTheSettingsOurOrderNeeds(t *testing.T) {
	f := mappingstest.New()
	defer f.Close()
	m := mappings.New(client(f), mappings.Config{Functions: []string{projectorARN, syncARN},
		FailureDestinations: map[string]string{projectorARN: projectorQueue, syncARN: syncQueue}})
	if err := m.Ensure(t.Context(), streamARN("p_s_t_user_commands", 0)); err != nil {
		t.Fatal(err)
	}
	got := f.Mappings()
	if len(got) != 2 {
		t.Fatalf("%d mappings, want 2", len(got))
	}
	var fns []string
	for _, g := range got {
		fns = append(fns, g.FunctionArn)
		if g.StartingPosition != "TRIM_HORIZON" || g.ParallelizationFactor != 1 || !g.BisectBatchOnFunctionError ||
			!slices.Equal(g.FunctionResponseTypes, []string{"ReportBatchItemFailures"}) ||
			g.MaximumRetryAttempts != mappings.MaximumRetryAttempts || g.MaximumRetryAttempts < 0 ||
			g.MaximumRecordAgeInSeconds != mappings.MaximumRecordAgeSeconds || g.MaximumRecordAgeInSeconds < 0 ||
			g.BatchSize != mappings.BatchSize {
			t.Errorf("mapping %+v", g)
		}
	}
	slices.Sort(fns)
	if !slices.Equal(fns, []string{syncARN, projectorARN}) {
		t.Errorf("functions %v", fns)
	}
}

// Each consumer's mappings send what they give up to that consumer's own queue, which its
// function reads (an SQS message reaches one consumer only); a function without one gets none.
func TestEachConsumersMappingsFailToItsOwnQueue(t *testing.T) {
	f := mappingstest.New()
	defer f.Close()
	m := mappings.New(client(f), mappings.Config{Functions: []string{projectorARN, syncARN},
		FailureDestinations: map[string]string{projectorARN: projectorQueue, syncARN: syncQueue}})
	for i := range 2 {
		if err := m.Ensure(t.Context(), streamARN(fmt.Sprintf("p_s_t%d_user_commands", i), 0)); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{projectorARN: projectorQueue, syncARN: syncQueue}
	got := f.Mappings()
	if len(got) != 4 {
		t.Fatalf("%d mappings, want 4", len(got))
	}
	for _, g := range got {
		if g.OnFailure != want[g.FunctionArn] {
			t.Errorf("mapping of %s to %s fails to %q, want %q", g.EventSourceArn, g.FunctionArn, g.OnFailure, want[g.FunctionArn])
		}
	}

	f2 := mappingstest.New()
	defer f2.Close()
	only := mappings.New(client(f2), mappings.Config{Functions: []string{projectorARN, syncARN},
		FailureDestinations: map[string]string{projectorARN: projectorQueue}})
	if err := only.Ensure(t.Context(), streamARN("p_s_t_user_commands", 0)); err != nil {
		t.Fatal(err)
	}
	for _, g := range f2.Mappings() {
		if w := map[string]string{projectorARN: projectorQueue}[g.FunctionArn]; g.OnFailure != w {
			t.Errorf("mapping to %s fails to %q, want %q", g.FunctionArn, g.OnFailure, w)
		}
	}
}

func TestEnsuringAgainKeepsTheExistingMappings(t *testing.T) {
	f := mappingstest.New()
	defer f.Close()
	m := mappings.New(client(f), mappings.Config{Functions: []string{projectorARN, syncARN}})
	arn := streamARN("p_s_t_user_commands", 0)
	for range 3 {
		if err := m.Ensure(t.Context(), arn); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(f.Mappings()); n != 2 {
		t.Errorf("%d mappings after three ensures, want 2", n)
	}
	if f.Conflicts() != 4 {
		t.Errorf("%d conflicts, want 4 (the 409s that name the existing mapping)", f.Conflicts())
	}
}

func TestManyTenantsProvisionedAtOnceStayUnderTheAccountsControlPlaneLimit(t *testing.T) {
	f := mappingstest.New()
	defer f.Close()
	m := mappings.New(client(f), mappings.Config{Functions: []string{projectorARN, syncARN}})
	const tenants = 40
	var wg sync.WaitGroup
	errs := make(chan error, tenants)
	for i := range tenants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- m.Ensure(context.Background(), streamARN(fmt.Sprintf("p_s_t%d_user_commands", i), 0))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := len(f.Mappings()); n != 2*tenants {
		t.Errorf("%d mappings, want %d", n, 2*tenants)
	}
	if f.Throttled() != 0 {
		t.Errorf("Lambda throttled %d calls: the pace is above the account's %d/s", f.Throttled(), mappingstest.AccountRate)
	}
}

func TestTheFakeThrottlesAboveFifteenCallsASecond(t *testing.T) {
	f := mappingstest.New()
	defer f.Close()
	c := client(f)
	// Without the pace, and without the SDK's retries, the bucket runs dry.
	for i := range 40 {
		_, _ = c.ListEventSourceMappings(t.Context(), &lambda.ListEventSourceMappingsInput{FunctionName: aws.String(fmt.Sprint(i))},
			func(o *lambda.Options) { o.RetryMaxAttempts = 1 })
	}
	if f.Throttled() == 0 {
		t.Error("40 calls at once were not throttled")
	}
}

func TestDroppingATableRemovesItsMappingsAndARecreatedTableGetsNewOnes(t *testing.T) {
	f := mappingstest.New()
	defer f.Close()
	m := mappings.New(client(f), mappings.Config{Functions: []string{projectorARN, syncARN}})
	const table, other = "p_s_t_user_commands", "p_s_u_user_commands"
	for _, arn := range []string{streamARN(table, 0), streamARN(other, 0)} {
		if err := m.Ensure(t.Context(), arn); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Remove(t.Context(), streamARN(table, 0)); err != nil {
		t.Fatal(err)
	}
	for _, g := range f.Mappings() {
		if mappings.StreamTable(g.EventSourceArn) != other {
			t.Errorf("mapping of %s left after its table was dropped", g.EventSourceArn)
		}
	}
	if n := len(f.Mappings()); n != 2 {
		t.Errorf("%d mappings left, want the other tenant's 2", n)
	}
	// The table made again has a new stream, hence new mappings.
	if err := m.Ensure(t.Context(), streamARN(table, 1)); err != nil {
		t.Fatal(err)
	}
	// A late drop of the old incarnation leaves the new one's mappings alone.
	if err := m.Remove(t.Context(), streamARN(table, 0)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range f.Mappings() {
		if g.EventSourceArn == streamARN(table, 1) {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d mappings of the new stream, want 2", n)
	}
	// Removing what is gone already is not an error.
	if err := m.Remove(t.Context(), streamARN("p_s_none_user_commands", 0)); err != nil {
		t.Error(err)
	}
}
