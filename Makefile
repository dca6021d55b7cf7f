# ssodir — see README.md.
SHELL := /bin/bash
GO ?= go
BIN := bin
SERVICES := command-api query-api projector keycloak-sync
FUZZTIME ?= 10s
# The command API's fuzz workers each start a DynamoDB Local and replay the seed corpus
# against it first; give them time to get past that and actually fuzz.
API_FUZZTIME ?= 45s
BENCH_SCALE ?= full

.PHONY: all build run test vet fmt-check unit fuzz bench clean dynamodb-local

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ $(addprefix ./cmd/,$(SERVICES))

# Starts DynamoDB Local, the four services and a demo tenant; Ctrl-C stops everything.
run: build
	scripts/run-dev.sh

dynamodb-local:
	scripts/dynamodb-local.sh install

# Every test. Each test package that touches storage starts its own DynamoDB Local.
test: dynamodb-local vet fmt-check unit fuzz

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

unit:
	$(GO) test -race -count=1 -timeout 20m ./...

# Brief coverage-guided fuzzing of both APIs' request decoding (the seed corpora also run
# in `unit`).
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzCommandAPI$$' -fuzztime $(API_FUZZTIME) ./cmd/command-api
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeJSON$$' -fuzztime $(FUZZTIME) ./internal/httpapi
	$(GO) test -run '^$$' -fuzz '^FuzzHandlers$$' -fuzztime $(FUZZTIME) ./internal/queries

bench: build
	$(GO) run ./cmd/ssodir-bench -scale $(BENCH_SCALE) -out bench-results.json

clean:
	rm -rf $(BIN) .data
