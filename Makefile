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

.PHONY: all build run test vet fmt-check lint-openapi unit scale-test fuzz bench clean dynamodb-local chromium console-screenshots

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ $(addprefix ./cmd/,$(SERVICES)) ./cmd/ssodirctl

# Starts DynamoDB Local, the four services and a demo tenant; Ctrl-C stops everything.
run: build
	scripts/run-dev.sh

dynamodb-local:
	scripts/dynamodb-local.sh install

# Debian's chromium, for the web console's browser test (test/console).
chromium:
	scripts/chromium.sh >/dev/null

# Runs the console's browser test and writes its screenshots into docs/.
console-screenshots: dynamodb-local chromium
	SSODIR_CONSOLE_SCREENSHOTS=$(CURDIR)/docs $(GO) test -count=1 -run '^TestConsoleInABrowser$$' ./test/console

# Every test. Each test package that touches storage starts its own DynamoDB Local.
test: dynamodb-local chromium vet fmt-check lint-openapi unit fuzz

vet:
	$(GO) vet ./...

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
unit:
	$(GO) test -race -count=1 -timeout 20m ./...

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
