package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `cdk synth -c stage=…` with the pinned CDK command line works offline: no AWS
// credentials, no module download (GOPROXY=off), every outbound connection refused, and
// the template names the stage's resources.
func TestCdkSynthWorksOffline(t *testing.T) {
	cdk := os.Getenv("SSODIR_CDK")
	if cdk == "" {
		out, err := exec.Command("make", "-s", "-C", "..", "cdk").Output()
		if err != nil {
			t.Fatalf("install the CDK command line (make cdk): %v", err)
		}
		lines := strings.Fields(string(out))
		cdk = lines[len(lines)-1]
	}
	dir := t.TempDir()
	for _, service := range Services {
		if err := placeholderZip(filepath.Join(dir, service+"-arm64.zip")); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "cdk.out")
	cmd := exec.Command(cdk, "synth", "--no-notices", "--no-version-reporting", "-c", "stage=stg", "-c", "assets="+dir, "-o", out, "--quiet")
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly", "AWS_EC2_METADATA_DISABLED=true",
		"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9", "NO_PROXY=", "AWS_PROFILE=none-here",
		"AWS_CONFIG_FILE="+filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "none"),
		"CDK_DISABLE_CLI_TELEMETRY=true", "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cdk synth: %v\n%s", err, b)
	}
	raw, err := os.ReadFile(filepath.Join(out, "ssodir-stg.template.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tmpl map[string]any
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		t.Fatal(err)
	}
	if env := functionEnvOf(tmpl, "ssodir-stg-command-api"); env == nil || env["SSO_TABLE_PREFIX"] != "mbcsso_stg" {
		t.Errorf("the stg stack's command API has environment %v, want prefix mbcsso_stg", env)
	}
}

func functionEnvOf(tmpl map[string]any, name string) map[string]any {
	for _, r := range resources(tmpl, "AWS::Lambda::Function") {
		if p := props(r); p["FunctionName"] == name {
			return p["Environment"].(map[string]any)["Variables"].(map[string]any)
		}
	}
	return nil
}
