package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docs/aws.md's cost tables are computed here from the synthesized stack (what is counted:
// keys, secrets, alarms, dashboards, metric filters, routes, schedules, the functions'
// memory) and from the capacity units ssodir-bench measured (deploy/testdata/capacity.json,
// the output of `ssodir-bench -only capacity`), so they cannot drift from what deploys. The
// test fails when the docs differ; SSODIR_UPDATE_DOCS=1 writes them.

// Prices (US East, N. Virginia; docs/aws.md, "Prices used").
const (
	priceWRU          = 0.625 / 1e6
	priceRRU          = 0.125 / 1e6
	priceStorageGB    = 0.25 + 0.20 // storage and point-in-time recovery
	priceGBSecond     = 0.0000133334
	priceInvocation   = 0.20 / 1e6
	priceAPIRequest   = 1.00 / 1e6
	priceKey          = 1.0
	priceKMSRequest   = 0.03 / 1e4
	priceSecret       = 0.40
	priceAlarm        = 0.10
	priceDashboard    = 3.0
	priceMetric       = 0.30
	priceLogsGB       = 0.50
	hoursPerMonth     = 720.0
	minutesPerMonth   = hoursPerMonth * 60
	metricsPerRoute   = 6 // an HTTP API's detailed metrics: Count, 4xx, 5xx, Latency, IntegrationLatency, DataProcessed
	tickSeconds       = 0.2
	apiSeconds        = 0.02
	batchSeconds      = 0.05
	reconcileGBs      = 2.5
	logBytesPerAPIReq = 1300
)

// The tenant of the table: 2,000 users in 50 groups, and what it does in a month.
const (
	tenantUsers       = 2000
	tenantCreates     = 200
	tenantUpdates     = 2000
	tenantMemberships = 1000
	tenantGets        = 50000
	tenantPages       = 10000
	tenantWaits       = 3000
	tenantStorageGB   = 0.08
	tenantTables      = 3
	keyRequestsAnHour = 12 // per table: DynamoDB caches a table's key for minutes
)

type stageCounts struct {
	keys, secrets, alarms, dashboards, filters, routes, functions int
	ticks                                                         float64 // scheduled invocations a month
	tickGBs                                                       float64
	memoryGB                                                      map[string]float64
}

var rateRE = regexp.MustCompile(`^rate\((\d+) minutes?\)$`)

func countStage(t *testing.T, tmpl map[string]any) stageCounts {
	t.Helper()
	c := stageCounts{memoryGB: map[string]float64{}}
	c.keys = len(resources(tmpl, "AWS::KMS::Key"))
	c.secrets = len(resources(tmpl, "AWS::SecretsManager::Secret"))
	c.alarms = len(resources(tmpl, "AWS::CloudWatch::Alarm"))
	c.dashboards = len(resources(tmpl, "AWS::CloudWatch::Dashboard"))
	c.filters = len(resources(tmpl, "AWS::Logs::MetricFilter"))
	fnByID := map[string]string{}
	for id, r := range resources(tmpl, "AWS::Lambda::Function") {
		p := props(r)
		service := strings.TrimPrefix(p["FunctionName"].(string), "ssodir-"+testStage+"-")
		c.memoryGB[service] = p["MemorySize"].(float64) / 1024
		fnByID[id] = service
		c.functions++
	}
	detailed := 0
	for _, r := range resources(tmpl, "AWS::ApiGatewayV2::Stage") {
		if rs, _ := props(r)["DefaultRouteSettings"].(map[string]any); rs["DetailedMetricsEnabled"] == true {
			detailed++
		}
	}
	if detailed != len(resources(tmpl, "AWS::ApiGatewayV2::Stage")) {
		t.Fatalf("detailed metrics on %d stages of %d: the cost model counts them on all", detailed, len(resources(tmpl, "AWS::ApiGatewayV2::Stage")))
	}
	c.routes = len(resources(tmpl, "AWS::ApiGatewayV2::Route"))
	for id, r := range resources(tmpl, "AWS::Events::Rule") {
		p := props(r)
		m := rateRE.FindStringSubmatch(fmt.Sprint(p["ScheduleExpression"]))
		if m == nil {
			t.Fatalf("rule %s: schedule %v is no rate in minutes", id, p["ScheduleExpression"])
		}
		every, _ := strconv.ParseFloat(m[1], 64)
		ticks := minutesPerMonth / every
		for _, target := range p["Targets"].([]any) {
			arn, _ := target.(map[string]any)["Arn"].(map[string]any)["Fn::GetAtt"].([]any)
			service := fnByID[fmt.Sprint(arn[0])]
			c.ticks += ticks
			c.tickGBs += ticks * tickSeconds * c.memoryGB[service]
		}
	}
	return c
}

func readCapacity(t *testing.T) map[string]float64 {
	t.Helper()
	name := os.Getenv("SSODIR_BENCH_RESULTS")
	if name == "" {
		name = filepath.Join("testdata", "capacity.json")
	}
	raw, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Scenarios []struct {
			Name    string             `json:"name"`
			Figures map[string]float64 `json:"figures"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for _, s := range r.Scenarios {
		if s.Name == "capacity" {
			return s.Figures
		}
	}
	t.Fatalf("%s has no capacity scenario", name)
	return nil
}

// costTables is docs/aws.md's text between the markers.
func costTables(t *testing.T, c stageCounts, capacity map[string]float64) string {
	t.Helper()
	unit := func(op, service, kind string) float64 {
		v, ok := capacity[op+"."+service+"."+kind]
		if !ok && !(kind == "rcu" && service == CommandAPI && op == "create") {
			t.Fatalf("no capacity figure %s.%s.%s", op, service, kind)
		}
		return v
	}
	per := func(op, kind string) float64 {
		return unit(op, CommandAPI, kind) + unit(op, Projector, kind) + unit(op, KeycloakSync, kind)
	}
	reconciles := minutesPerMonth / reconcileEvery()
	wCreate, wUpdate, wMember := per("create", "wcu"), per("update", "wcu"), per("membership", "wcu")
	writes := tenantCreates*wCreate + tenantUpdates*wUpdate + tenantMemberships*wMember + reconciles*1
	cmdReads := tenantCreates*per("create", "rcu") + tenantUpdates*per("update", "rcu") + tenantMemberships*per("membership", "rcu")
	perUser := unit("reconcile_per_user", KeycloakSync, "rcu")
	reads := tenantGets*unit("get", QueryAPI, "rcu") + tenantPages*unit("list_page", QueryAPI, "rcu") +
		tenantWaits*unit("min_version_get", QueryAPI, "rcu") + cmdReads + reconciles*tenantUsers*perUser
	kmsRequests := tenantTables * keyRequestsAnHour * hoursPerMonth
	apiRequests := float64(tenantGets + tenantPages + tenantWaits + tenantCreates + tenantUpdates + tenantMemberships)
	batches := float64(tenantCreates + tenantUpdates + tenantMemberships)
	gbs := apiRequests*apiSeconds*c.memoryGB[QueryAPI] + batches*batchSeconds*(c.memoryGB[Projector]+c.memoryGB[KeycloakSync]) + reconciles*reconcileGBs
	invocations := apiRequests + 2*batches + reconciles
	logsGB := apiRequests * logBytesPerAPIReq / 1e9

	dynamo := writes*priceWRU + reads*priceRRU + tenantStorageGB*priceStorageGB
	other := kmsRequests*priceKMSRequest + gbs*priceGBSecond + invocations*priceInvocation + apiRequests*priceAPIRequest + logsGB*priceLogsGB

	var b strings.Builder
	row := func(cells ...string) { b.WriteString("| " + strings.Join(cells, " | ") + " |\n") }
	row("per tenant and month", "units or amount", "cost")
	row("---", "---", "---")
	row("DynamoDB writes", fmt.Sprintf("creates %s × %.1f + updates %s × %.1f + memberships %s × %.1f + reconciles %s × 1 ≈ %s WRU",
		num(tenantCreates), wCreate, num(tenantUpdates), wUpdate, num(tenantMemberships), wMember, num(reconciles), num(round(writes, 1000))), money(writes*priceWRU))
	row("DynamoDB reads", fmt.Sprintf("GETs %s × %.2f + pages %s × %.1f + waits %s × %.1f + commands and consumers ≈ %s + reconciles %s × %s × %.3f ≈ %s RRU",
		num(tenantGets), unit("get", QueryAPI, "rcu"), num(tenantPages), unit("list_page", QueryAPI, "rcu"), num(tenantWaits), unit("min_version_get", QueryAPI, "rcu"),
		num(round(cmdReads, 100)), num(reconciles), num(tenantUsers), perUser, num(round(reads, 10000))), money(reads*priceRRU))
	row("DynamoDB storage and recovery", fmt.Sprintf("%.2f GB × $%.2f", tenantStorageGB, priceStorageGB), money(tenantStorageGB*priceStorageGB))
	row(fmt.Sprintf("KMS table-key requests (an upper estimate: %d tables × %d an hour)", tenantTables, keyRequestsAnHour), "≤ "+num(round(kmsRequests, 1000)), "≤ "+money(kmsRequests*priceKMSRequest))
	row("Lambda", fmt.Sprintf("%s API requests, %s × 2 consumer batches, %s reconciles: ≈ %s GB-s, %s requests",
		num(round(apiRequests, 1000)), num(batches), num(reconciles), num(round(gbs, 100)), num(round(invocations, 1000))), money(gbs*priceGBSecond+invocations*priceInvocation))
	row("API Gateway", num(round(apiRequests, 1000))+" requests", money(apiRequests*priceAPIRequest))
	row("CloudWatch Logs", fmt.Sprintf("≈ %.1f KB per API request: %.0f MB", logBytesPerAPIReq/1000.0, logsGB*1000), money(logsGB*priceLogsGB))
	row("**a tenant**", "", "**≈ "+money(dynamo+other)+"**")

	metrics := c.filters + c.routes*metricsPerRoute
	fixedItems := []struct {
		what  string
		count string
		cost  float64
	}{
		{"KMS keys", num(float64(c.keys)), float64(c.keys) * priceKey},
		{"Secrets Manager secrets", num(float64(c.secrets)), float64(c.secrets) * priceSecret},
		{"CloudWatch alarms", num(float64(c.alarms)), float64(c.alarms) * priceAlarm},
		{"dashboards", num(float64(c.dashboards)), float64(c.dashboards) * priceDashboard},
		{fmt.Sprintf("custom metrics: %d metric filters, %d routes × %d detailed metrics", c.filters, c.routes, metricsPerRoute), num(float64(metrics)), float64(metrics) * priceMetric},
		{fmt.Sprintf("scheduled invocations (%.0f ms each at the function's memory, assumed)", tickSeconds*1000), num(round(c.ticks, 100)), c.tickGBs*priceGBSecond + c.ticks*priceInvocation},
	}
	fixed := 0.0
	b.WriteString("\nA stage's fixed cost, whatever its tenants (" + num(float64(c.functions)) + " functions; counted in the synthesized template):\n\n")
	row("fixed, a month", "count", "cost")
	row("---", "---", "---")
	for _, it := range fixedItems {
		row(it.what, it.count, money(it.cost))
		fixed += it.cost
	}
	row("**fixed**", "", "**≈ "+money(fixed)+"**")

	b.WriteString("\n")
	row("tenants", "DynamoDB", "Lambda, API Gateway, logs, KMS", "fixed", "a month")
	row("---", "---", "---", "---", "---")
	for _, n := range []float64{10, 100, 1000} {
		row(num(n), money(n*dynamo), money(n*other), money(fixed), "≈ "+money(n*(dynamo+other)+fixed))
	}
	return b.String()
}

// reconcileEvery is the reconcile schedule's interval in minutes.
func reconcileEvery() float64 {
	for _, sc := range schedules {
		if sc.service == KeycloakSync && sc.task == "reconcile" {
			return sc.every
		}
	}
	return 15
}

func round(x, to float64) float64 { return math.Round(x/to) * to }

// num writes a whole number with thousands separators.
func num(x float64) string {
	s := strconv.FormatInt(int64(math.Round(x)), 10)
	var out []string
	for len(s) > 3 {
		out = append([]string{s[len(s)-3:]}, out...)
		s = s[:len(s)-3]
	}
	return strings.Join(append([]string{s}, out...), ",")
}

func money(x float64) string {
	if x >= 100 {
		return "$" + num(x)
	}
	return fmt.Sprintf("$%.2f", x)
}

const (
	costBegin = "<!-- cost tables: computed by deploy/cost_test.go from the synthesized stack and deploy/testdata/capacity.json; `cd deploy && SSODIR_UPDATE_DOCS=1 go test -run TestTheCostTablesAreComputedFromTheStack .` rewrites them -->\n"
	costEnd   = "<!-- end of the cost tables -->"
)

func TestTheCostTablesAreComputedFromTheStack(t *testing.T) {
	_, _, j := synth(t)
	c := countStage(t, j)
	if c.keys == 0 || c.alarms == 0 || c.secrets == 0 || c.routes == 0 || c.ticks == 0 {
		t.Fatalf("the template counts nothing: %+v", c)
	}
	want := costTables(t, c, readCapacity(t))
	name := filepath.Join("..", "docs", "aws.md")
	raw, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, k := strings.Index(doc, costBegin), strings.Index(doc, costEnd)
	if i < 0 || k < i {
		t.Fatalf("%s has no cost tables between the markers %q and %q", name, strings.TrimSpace(costBegin), costEnd)
	}
	got := doc[i+len(costBegin) : k]
	if got == want {
		return
	}
	if os.Getenv("SSODIR_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(name, []byte(doc[:i+len(costBegin)]+want+doc[k:]), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: cost tables rewritten", name)
		return
	}
	t.Errorf("%s's cost tables differ from the stack's (SSODIR_UPDATE_DOCS=1 rewrites them); want:\n%s", name, want)
}
