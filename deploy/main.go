// Command deploy is ssodir's AWS CDK app: one stack per stage (`cdk deploy -c stage=prod`),
// checked by cdk-nag's AwsSolutions rules at every synthesis. See docs/aws.md.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// defaultAssets is where `make lambda` puts the zips, from deploy/.
var defaultAssets = filepath.Join("..", "bin", "lambda")

func main() {
	defer jsii.Close()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "deploy:", err)
		os.Exit(1)
	}
}

func run() error {
	app := awscdk.NewApp(nil)
	stage := contextString(app, "stage", "")
	assets := contextString(app, "assets", defaultAssets)
	if err := ensureAssets(assets); err != nil {
		return err
	}
	concurrency, err := parseConcurrency(contextString(app, "concurrency", ""))
	if err != nil {
		return err
	}
	props := StageProps{Stage: stage, Prefix: contextString(app, "prefix", ""), AssetDir: assets, Concurrency: concurrency,
		EventBus: contextString(app, "event-bus", "")}
	if q := contextString(app, "table-quota", ""); q != "" {
		if props.TableQuota, err = strconv.Atoi(q); err != nil || props.TableQuota < 1 {
			return fmt.Errorf("table-quota %q: give the account's DynamoDB table quota, a positive number", q)
		}
	}
	if account, region := os.Getenv("CDK_DEFAULT_ACCOUNT"), os.Getenv("CDK_DEFAULT_REGION"); account != "" && region != "" {
		props.Env = &awscdk.Environment{Account: jsii.String(account), Region: jsii.String(region)}
	}
	if _, err := NewStage(app, props); err != nil {
		return err
	}
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	app.Synth(nil)
	return nil
}

// parseConcurrency reads -c concurrency=projector=400,query-api=300: the functions named get
// that reserved concurrency, the others DefaultConcurrency.
func parseConcurrency(v string) (map[string]int, error) {
	out := map[string]int{}
	if v == "" {
		return out, nil
	}
	for _, part := range strings.Split(v, ",") {
		name, n, ok := strings.Cut(strings.TrimSpace(part), "=")
		count, err := strconv.Atoi(n)
		if !ok || err != nil || !slices.Contains(Services, name) {
			return nil, fmt.Errorf("concurrency %q: give service=N,… with services among %s", v, strings.Join(Services, ", "))
		}
		out[name] = count
	}
	return out, nil
}

func contextString(app awscdk.App, key, def string) string {
	if v, ok := app.Node().TryGetContext(jsii.String(key)).(string); ok && v != "" {
		return v
	}
	return def
}

// ensureAssets builds the functions' arm64 zips (make lambda, at the repository's root)
// when the assets are the repository's own: make builds again only what a Go source changed
// since, so `cdk synth` never packages a stale binary, and works on a fresh clone. Zips given
// elsewhere (-c assets=…) are taken as they are.
func ensureAssets(dir string) error {
	if dir == defaultAssets {
		cmd := exec.Command("make", "-s", "-C", "..", "lambda", "LAMBDA_ARCHS=arm64")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("`make lambda LAMBDA_ARCHS=arm64` failed: %w", err)
		}
	}
	for _, service := range Services {
		if _, err := os.Stat(filepath.Join(dir, service+"-arm64.zip")); err != nil {
			return fmt.Errorf("%s-arm64.zip: %w", service, err)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
