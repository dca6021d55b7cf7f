package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/ssodir/ssodir/internal/config"
)

// A stage that names a bus: the projector gets SSO_EVENTBRIDGE_BUS and a schedule that
// publishes, and its role alone may call events:PutEvents, on that bus's ARN only.
func TestAStageThatNamesABusGrantsOnlyPutEventsOnIt(t *testing.T) {
	dir := t.TempDir()
	for _, service := range Services {
		if err := placeholderZip(filepath.Join(dir, service+"-arm64.zip")); err != nil {
			t.Fatal(err)
		}
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(dir, "cdk.out"))})
	s, err := NewStage(app, StageProps{Stage: "busy", AssetDir: dir, EventBus: "directory-changes",
		Env: &awscdk.Environment{Account: jsii.String("123456789012"), Region: jsii.String("eu-west-1")}})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := assertions.Template_FromStack(s.Stack, nil)
	j := *tmpl.ToJSON()
	busARN := "arn:${AWS::Partition}:events:eu-west-1:123456789012:event-bus/directory-changes"

	for _, r := range resources(j, "AWS::Lambda::Function") {
		p := props(r)
		env := p["Environment"].(map[string]any)["Variables"].(map[string]any)
		bus, ok := env["SSO_EVENTBRIDGE_BUS"]
		if isProjector := p["FunctionName"] == "ssodir-busy-"+Projector; isProjector != ok {
			t.Errorf("%v: SSO_EVENTBRIDGE_BUS %v", p["FunctionName"], bus)
		} else if ok {
			if bus != "directory-changes" {
				t.Errorf("the projector's SSO_EVENTBRIDGE_BUS is %v", bus)
			}
			_, err := config.LoadProjector(config.Map(map[string]string{"SSO_EVENTBRIDGE_BUS": fmt.Sprint(bus)}))
			if err != nil && strings.Contains(err.Error(), "SSO_EVENTBRIDGE_BUS") {
				t.Errorf("the projector refuses the stage's bus: %v", err)
			}
		}
	}

	var granted []string
	for _, r := range resources(j, "AWS::IAM::Policy") {
		doc := props(r)["PolicyDocument"].(map[string]any)
		roles := fmt.Sprint(props(r)["Roles"])
		for _, st := range doc["Statement"].([]any) {
			st := st.(map[string]any)
			actions := fmt.Sprint(st["Action"])
			if !strings.Contains(actions, "events:") {
				continue
			}
			granted = append(granted, roles)
			if actions != "events:PutEvents" {
				t.Errorf("a grant of %s, want events:PutEvents alone", actions)
			}
			if res := resolveSub(st["Resource"]); res != busARN {
				t.Errorf("events:PutEvents on %v, want %s", res, busARN)
			}
			if !strings.Contains(roles, lid(s, s.Functions[Projector].Role())) {
				t.Errorf("events:PutEvents granted to %s, not the projector", roles)
			}
		}
	}
	if len(granted) != 1 {
		t.Errorf("events: granted in %d statements (%v), want the projector's one", len(granted), granted)
	}
	has(t, "the publish-events schedule", func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Events::Rule"), map[string]any{
			"ScheduleExpression": "rate(1 minute)",
			"Targets": []any{assertions.Match_ObjectLike(&map[string]any{
				"Arn":   map[string]any{"Fn::GetAtt": []any{lid(s, s.Functions[Projector]), "Arn"}},
				"Input": `{"ssodir_task":"publish-events"}`,
			})},
		})
	})
}

// resolveSub renders a resource of the template: a string, or {"Fn::Join": ["", parts]}
// whose parts are strings and {"Ref": "AWS::Partition"}.
func resolveSub(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case map[string]any:
		if ref, ok := v["Ref"]; ok {
			return "${" + fmt.Sprint(ref) + "}"
		}
		if join, ok := v["Fn::Join"].([]any); ok && len(join) == 2 {
			var parts []string
			for _, p := range join[1].([]any) {
				parts = append(parts, resolveSub(p))
			}
			return strings.Join(parts, fmt.Sprint(join[0]))
		}
	}
	return fmt.Sprint(v)
}

// The test stage names no bus: no function may call EventBridge and nothing publishes.
func TestAStageWithoutABusHasNoEventBridgeGrant(t *testing.T) {
	_, _, j := synth(t)
	for _, r := range resources(j, "AWS::IAM::Policy") {
		if s := fmt.Sprint(props(r)["PolicyDocument"]); strings.Contains(s, "events:") {
			t.Errorf("a grant of EventBridge without a bus: %s", s)
		}
	}
	if slices.Contains(schedules, publishEvents) {
		t.Error("publish-events is scheduled without a bus")
	}
}
