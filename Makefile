# ssodir — see README.md.
SHELL := /bin/bash
GO ?= go
BIN := bin
SERVICES := command-api query-api projector keycloak-sync
# Fuzzing runs a number of executions, not a duration: with a duration, Go 1.26's fuzz
# coordinator can fail a clean run with "context deadline exceeded" when the time ends
# while a worker is busy (golang/go#75804, fixed in Go 1.27). About 10-45 s each here; the
# command API's workers each start a DynamoDB Local and replay the seed corpus first.
API_FUZZ ?= 100000x
DECODE_FUZZ ?= 150000x
QUERY_FUZZ ?= 50000x
BENCH_SCALE ?= full
# The OpenAPI linter, pinned, installed from npm into the cache beside DynamoDB Local.
REDOCLY_VERSION := 2.77.0
CACHE_DIR := $(or $(SSODIR_CACHE_DIR),$(CURDIR)/.cache)
REDOCLY_DIR := $(CACHE_DIR)/redocly-cli-$(REDOCLY_VERSION)
REDOCLY := $(REDOCLY_DIR)/node_modules/.bin/redocly
# The AWS CDK command line, pinned, installed from npm into the cache (deploy/, docs/aws.md).
CDK_VERSION := 2.1148.1
CDK_DIR := $(CACHE_DIR)/aws-cdk-$(CDK_VERSION)
CDK := $(CDK_DIR)/node_modules/.bin/cdk
# Where the services record their AWS calls during `unit`, for deploy/'s least-privilege
# test (fresh on every run).
AWS_CALL_LOG := $(CURDIR)/.data/aws-calls
# The stage `make synth` synthesizes.
STAGE ?= dev
# What the CDK command line needs to run offline and quietly.
CDK_ENV := CDK_DISABLE_CLI_TELEMETRY=true JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20

LAMBDA_DIR := $(BIN)/lambda
LAMBDA_ARCHS := arm64 amd64

.PHONY: all build install lambda run run-clean test vet fmt-check lint-openapi unit deploy-test cdk synth scale-test fuzz bench clean dynamodb-local chromium console-screenshots

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ $(addprefix ./cmd/,$(SERVICES)) ./cmd/ssodirctl

# ssodirctl into Go's bin directory ($GOBIN, else the first of $(go env GOPATH) + /bin),
# from this checkout (the module is not published); says where, and how to put it on the PATH.
install:
	$(GO) install ./cmd/ssodirctl
	@dir=$$($(GO) env GOBIN); dir=$${dir:-$$($(GO) env GOPATH | cut -d: -f1)/bin}; \
	echo "ssodirctl is $$dir/ssodirctl"; \
	case ":$$PATH:" in *":$$dir:"*) ;; *) echo "$$dir is not on your PATH: export PATH=\"$$dir:\$$PATH\"";; esac

# Each service as a Lambda function (provided.al2023): bin/lambda/<service>-<arch>.zip,
# each holding one executable named bootstrap (docs/aws.md, "Lambda mode"). A zip is built
# again when a Go source, go.mod or go.sum is newer; `make lambda LAMBDA_ARCHS=arm64` builds
# only what a stage deploys (deploy/ runs that).
LAMBDA_ZIPS = $(foreach arch,$(LAMBDA_ARCHS),$(foreach svc,$(SERVICES),$(LAMBDA_DIR)/$(svc)-$(arch).zip))
LAMBDA_SOURCES := $(shell find cmd internal -name '*.go' ! -name '*_test.go' 2>/dev/null) go.mod go.sum

lambda: $(LAMBDA_ZIPS)

$(LAMBDA_DIR)/%.zip: $(LAMBDA_SOURCES)
	@mkdir -p $(LAMBDA_DIR)
	@set -e; stem=$*; svc=$${stem%-*}; arch=$${stem##*-}; dir=$$(mktemp -d); \
	CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -tags lambda.norpc -trimpath -ldflags=-s -o $$dir/bootstrap ./cmd/$$svc; \
	rm -f $@; (cd $$dir && zip -q -X $(abspath $@) bootstrap); \
	rm -rf $$dir; echo "$@"

# Starts DynamoDB Local, the four services and a demo tenant; Ctrl-C stops everything.
# The tables stay in .data/dynamodb/ for the next run; run-clean starts without them.
run: build
	scripts/run-dev.sh

run-clean: build
	rm -rf .data/dynamodb .data/logs
	scripts/run-dev.sh

dynamodb-local:
	scripts/dynamodb-local.sh install

# Debian's chromium, for the web console's browser test (test/console).
chromium:
	scripts/chromium.sh >/dev/null

# Runs the console's browser test and writes its screenshots into docs/.
console-screenshots: dynamodb-local chromium
	SSODIR_CONSOLE_SCREENSHOTS=$(CURDIR)/docs $(GO) test -count=1 -run '^(TestConsoleInABrowser|TestNewcomerWalkThrough)$$' ./test/console

# Every test. Each test package that touches storage starts its own DynamoDB Local.
test: dynamodb-local chromium vet fmt-check lint-openapi unit deploy-test fuzz

vet:
	$(GO) vet ./...
	cd deploy && $(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# The served OpenAPI document passes Redocly's recommended rules (redocly.yaml) with no
# error and no warning (redocly itself fails only on errors).
lint-openapi: $(REDOCLY)
	@out=$$(REDOCLY_TELEMETRY=off $(REDOCLY) lint --format=summary --config redocly.yaml internal/openapi/openapi.json 2>&1); \
	status=$$?; problems=$$(echo "$$out" | grep -E '^(error|warning) '); \
	if [ $$status -ne 0 ] || [ -n "$$problems" ]; then echo "$$out"; echo "redocly lint: the OpenAPI document is not clean"; exit 1; fi; \
	echo "redocly lint: internal/openapi/openapi.json is clean"

$(REDOCLY):
	npm install --no-audit --no-fund --prefix $(REDOCLY_DIR) @redocly/cli@$(REDOCLY_VERSION)

# The streams scale test runs 500 tenants here, under the race detector (its goroutine
# limit); `make scale-test` runs the issue's 5,000 without it (2.5 to 6 minutes).
# Three test binaries at a time (-p 3), not go test's default of one per core: with two,
# the cores stood 20-45 % idle while tests waited on DynamoDB Local, their processes and
# their timers. Measured on the 2-core machine (2026-11-29, nothing else running): -p 2
# 849 s (with an eventbridge test 50 s longer than now), -p 3 669 s, -p 4 666 s (test/e2e
# 273 s at -p 3, 322 s at -p 4: past three, tests only slow each other down). Listing the
# longest packages first gained 40 s more at -p 3 (631 s), but test/e2e then took 408 s
# beside them, so the order stays go test's own (test/e2e last). More load also shows
# more of the tests' own timing races: fix them rather than lower -p.
unit:
	rm -rf $(AWS_CALL_LOG) && mkdir -p $(AWS_CALL_LOG)
	SSODIR_AWS_CALL_LOG=$(AWS_CALL_LOG) $(GO) test -race -count=1 -p 3 -timeout 20m ./...

# The CDK app's tests (its own Go module, which `go test ./...` above does not enter):
# assertions on the synthesized stack, cdk-nag, the pinned CDK command line's offline
# synthesis, and least privilege against the calls the last `unit` recorded (without any,
# the test runs test/e2e itself). The first run downloads the CDK's Go module (about 40 MB) into the
# shared module cache; every later run, CI's included, finds it there.
deploy-test: $(CDK)
	log=$(AWS_CALL_LOG); ls $$log/*.jsonl >/dev/null 2>&1 || log=; \
	cd deploy && SSODIR_AWS_CALL_LOG=$$log SSODIR_CDK=$(CDK) $(CDK_ENV) $(GO) test -count=1 -timeout 30m ./...

cdk: $(CDK)
	@echo $(CDK)

$(CDK):
	npm install --no-audit --no-fund --prefix $(CDK_DIR) aws-cdk@$(CDK_VERSION)

# The stage's CloudFormation template, offline (builds the functions' zips when missing).
synth: $(CDK)
	cd deploy && $(CDK_ENV) $(CDK) synth --no-notices -c stage=$(STAGE) > /dev/null && echo "deploy/cdk.out/ssodir-$(STAGE).template.json"

scale-test: dynamodb-local
	$(GO) test -count=1 -timeout 20m -run '^TestThousandsOfTenantsTwoConsumersNeverThrottled$$' ./internal/streams

# Brief coverage-guided fuzzing of both APIs' request decoding (the seed corpora also run
# in `unit`).
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzCommandAPI$$' -fuzztime $(API_FUZZ) ./cmd/command-api
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeJSON$$' -fuzztime $(DECODE_FUZZ) ./internal/httpapi
	$(GO) test -run '^$$' -fuzz '^FuzzHandlers$$' -fuzztime $(QUERY_FUZZ) ./internal/queries

bench: build
	$(GO) run ./cmd/ssodir-bench -scale $(BENCH_SCALE) -out bench-results.json

clean:
	rm -rf $(BIN) .data
