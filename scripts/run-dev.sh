#!/usr/bin/env bash
# `make run`: DynamoDB Local, the four ssodir services and a demo tenant on this machine.
# Ctrl-C (or SIGTERM) stops everything again.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
data="$root/.data"
mkdir -p "$data/logs"

# Development keys and token, made once and kept in .data/ (never committed). The query
# API gets its own cursor key and never the key that opens passwords.
[ -s "$data/secret.key" ] || head -c 32 /dev/urandom | base64 >"$data/secret.key"
[ -s "$data/cursor.key" ] || head -c 32 /dev/urandom | base64 >"$data/cursor.key"
[ -s "$data/dev-token" ] || echo "dev-$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')" >"$data/dev-token"
token=$(cat "$data/dev-token")

endpoint=$(scripts/dynamodb-local.sh start "${DYNAMODB_LOCAL_PORT:-}")

export AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=dummy AWS_SECRET_ACCESS_KEY=dummy
export AWS_ENDPOINT_URL_DYNAMODB="$endpoint" AWS_ENDPOINT_URL_DYNAMODB_STREAMS="$endpoint"
export SSO_SECRET_KEY=$(cat "$data/secret.key") SSO_BOOTSTRAP_TOKEN="$token"
export SSO_TABLE_PREFIX="${SSO_TABLE_PREFIX:-mbcsso_dev}"
# DynamoDB Local has no per-shard read limit: poll the streams tightly for a short lag (an
# idle stream's pause doubles from it up to SSO_STREAM_IDLE_POLL_MAX, so idling stays cheap).
export SSO_STREAM_POLL="${SSO_STREAM_POLL:-5ms}"
export SSO_COMMAND_ADDR="${SSO_COMMAND_ADDR:-127.0.0.1:8080}" SSO_QUERY_ADDR="${SSO_QUERY_ADDR:-127.0.0.1:8081}"
export SSO_PROJECTOR_ADDR="${SSO_PROJECTOR_ADDR:-127.0.0.1:8082}" SSO_KEYCLOAK_SYNC_ADDR="${SSO_KEYCLOAK_SYNC_ADDR:-127.0.0.1:8083}"
# The web console is served by the query API and calls the other services from the browser.
export SSO_CORS_ORIGINS="${SSO_CORS_ORIGINS:-http://$SSO_QUERY_ADDR}"

pids=()
stop() {
  trap - INT TERM EXIT
  echo "stopping…"
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  scripts/dynamodb-local.sh stop
}
trap stop INT TERM EXIT

wait_ready() {
  local name=$1 addr=$2
  for _ in $(seq 1 200); do
    curl -fs "http://$addr/readyz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "$name did not become ready; see $data/logs/$name.log" >&2
  exit 1
}

# start NAME ADDR [VAR=value…]: runs bin/NAME with the variables added; the query API is
# started without SSO_SECRET_KEY.
start() {
  local name=$1 addr=$2
  shift 2
  local unset=()
  [ "$name" = query-api ] && unset=(-u SSO_SECRET_KEY)
  env "${unset[@]}" "$@" "$root/bin/$name" >>"$data/logs/$name.log" 2>&1 &
  pids+=($!)
  wait_ready "$name" "$addr"
}

# The command API creates the shared tables the others read.
start command-api "$SSO_COMMAND_ADDR"
start projector "$SSO_PROJECTOR_ADDR"
# X-Min-Version reads wait on the projector's progress feed.
# The console learns the other services' addresses from the query API, never from a link.
start query-api "$SSO_QUERY_ADDR" SSO_CURSOR_KEY="$(cat "$data/cursor.key")" SSO_PROJECTOR_FEEDS="http://$SSO_PROJECTOR_ADDR" \
  SSO_CONSOLE_COMMAND_API="http://$SSO_COMMAND_ADDR" SSO_CONSOLE_PROJECTOR="http://$SSO_PROJECTOR_ADDR" \
  SSO_CONSOLE_KEYCLOAK_SYNC="http://$SSO_KEYCLOAK_SYNC_ADDR"
start keycloak-sync "$SSO_KEYCLOAK_SYNC_ADDR"

api() { curl -fsS -H "Authorization: Bearer $token" -H 'Content-Type: application/json' "$@" >/dev/null; }
base="http://$SSO_COMMAND_ADDR/v1/systems/demo/tenants"
api -X POST "$base" -d '{"tenant_id":"acme"}'
if api -X POST "$base/acme/users" -H 'Idempotency-Key: demo-jdoe' \
     -d '{"username":"jdoe","email":"jdoe@example.com","first_name":"Jane","last_name":"Doe"}' 2>/dev/null; then
  api -X POST "$base/acme/users" -H 'Idempotency-Key: demo-rroe' \
    -d '{"username":"rroe","email":"rroe@example.com","first_name":"Richard","last_name":"Roe"}'
  api -X POST "$base/acme/groups" -H 'Idempotency-Key: demo-admins' -d '{"name":"Admins","description":"Demo administrators"}'
  api -X PUT "$base/acme/groups/admins/members/jdoe" -H 'Idempotency-Key: demo-admins-jdoe'
fi

cat <<MSG

ssodir is running (logs in .data/logs/, Ctrl-C stops everything).

  command API    http://$SSO_COMMAND_ADDR      (OpenAPI: /openapi.json)
  query API      http://$SSO_QUERY_ADDR
  web console    $(scripts/console-link.sh)
                 (signs in once, within a minute; scripts/console-link.sh prints a fresh link)
  projector      http://$SSO_PROJECTOR_ADDR/metrics
  keycloak-sync  http://$SSO_KEYCLOAK_SYNC_ADDR/metrics
  DynamoDB Local $endpoint

  demo tenant    system "demo", tenant "acme" (users jdoe, rroe; group Admins)
  dev token      $token

  curl -H 'Authorization: Bearer $token' http://$SSO_QUERY_ADDR/v1/systems/demo/tenants/acme/users
MSG

wait -n "${pids[@]}" || true
echo "a service exited; see .data/logs/" >&2
