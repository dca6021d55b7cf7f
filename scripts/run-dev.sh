#!/usr/bin/env bash
# `make run`: DynamoDB Local, the four ssodir services and a demo tenant on this machine.
# Ctrl-C (or SIGTERM) stops everything again. The data stays in .data/ (DynamoDB Local's
# tables in .data/dynamodb/) for the next run; `make run-clean` starts from nothing.
#
# SSODIR_DATA_DIR (default .data) and SSODIR_BIN_DIR (default bin) move the data and the
# binaries (the tests do); DYNAMODB_LOCAL_PORT and the SSO_*_ADDR variables the ports.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
data="${SSODIR_DATA_DIR:-$root/.data}"
bin="${SSODIR_BIN_DIR:-$root/bin}"
export SSODIR_DATA_DIR="$data"
mkdir -p "$data/logs" "$data/dynamodb"

# Development keys and token, made once and kept in .data/ (never committed). The query
# API gets its own cursor key and never the key that opens passwords.
[ -s "$data/secret.key" ] || head -c 32 /dev/urandom | base64 >"$data/secret.key"
[ -s "$data/cursor.key" ] || head -c 32 /dev/urandom | base64 >"$data/cursor.key"
[ -s "$data/progress-token" ] || head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$data/progress-token"
[ -s "$data/dev-token" ] || echo "dev-$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')" >"$data/dev-token"
token=$(cat "$data/dev-token")

# On disk, so that the tables outlive the run (writes cost DynamoDB Local about three
# times what they cost in memory: shared/DYNAMODB-LOCAL.md).
endpoint=$(DYNAMODB_LOCAL_DB_PATH="$data/dynamodb" scripts/dynamodb-local.sh start "${DYNAMODB_LOCAL_PORT:-}")

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

# The supervised processes: their pids, names and log files, in start order.
pids=() names=() logs=()
stop() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  scripts/dynamodb-local.sh stop
}
interrupted() {
  echo "stopping (interrupted); the data stays in $data" >&2
  stop
  exit 0
}
trap interrupted INT TERM
trap stop EXIT

wait_ready() {
  local name=$1 addr=$2
  for _ in $(seq 1 200); do
    curl -fs "http://$addr/readyz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "$name did not become ready; see $data/logs/$name.log" >&2
  tail -n 20 "$data/logs/$name.log" >&2 || true
  exit 1
}

# start NAME ADDR [VAR=value…]: runs bin/NAME with the variables added; the query API is
# started without SSO_SECRET_KEY.
start() {
  local name=$1 addr=$2
  shift 2
  local unset=()
  [ "$name" = query-api ] && unset=(-u SSO_SECRET_KEY)
  env "${unset[@]}" "$@" "$bin/$name" >>"$data/logs/$name.log" 2>&1 &
  pids+=($!) names+=("$name") logs+=("$data/logs/$name.log")
  wait_ready "$name" "$addr"
}

# DynamoDB Local is not this shell's child (the start script leaves it running), so it is
# watched by its pid like the services.
pids+=("$(cat "$data/dynamodb-local.pid")") names+=("DynamoDB Local") logs+=("$data/dynamodb-local.log")

# The command API creates the shared tables the others read.
start command-api "$SSO_COMMAND_ADDR"
# X-Min-Version reads wait on the projector's progress feed: the query API finds it in the
# projector's heartbeat row and presents the service token both hold.
start projector "$SSO_PROJECTOR_ADDR" SSO_PROGRESS_TOKEN="$(cat "$data/progress-token")"
# The console learns the other services' addresses from the query API, never from a link.
start query-api "$SSO_QUERY_ADDR" SSO_CURSOR_KEY="$(cat "$data/cursor.key")" SSO_PROGRESS_TOKEN="$(cat "$data/progress-token")" \
  SSO_CONSOLE_COMMAND_API="http://$SSO_COMMAND_ADDR" SSO_CONSOLE_PROJECTOR="http://$SSO_PROJECTOR_ADDR" \
  SSO_CONSOLE_KEYCLOAK_SYNC="http://$SSO_KEYCLOAK_SYNC_ADDR"
start keycloak-sync "$SSO_KEYCLOAK_SYNC_ADDR"

api() { curl -fsS -H "Authorization: Bearer $token" -H 'Content-Type: application/json' "$@" >/dev/null; }
base="http://$SSO_COMMAND_ADDR/v1/systems/demo/tenants"
api -X POST "$base" -d '{"tenant_id":"acme"}'
# Its tables may take longer than the command API waits for them (DynamoDB Local on disk).
for _ in $(seq 1 600); do
  curl -fsS -H "Authorization: Bearer $token" "http://$SSO_QUERY_ADDR/v1/systems/demo/tenants/acme" 2>/dev/null \
    | grep -q '"status":"active"' && break
  sleep 0.1
done
if api -X POST "$base/acme/users" -H 'Idempotency-Key: demo-jdoe' \
     -d '{"username":"jdoe","email":"jdoe@example.com","first_name":"Jane","last_name":"Doe"}' 2>/dev/null; then
  api -X POST "$base/acme/users" -H 'Idempotency-Key: demo-rroe' \
    -d '{"username":"rroe","email":"rroe@example.com","first_name":"Richard","last_name":"Roe"}'
  api -X POST "$base/acme/groups" -H 'Idempotency-Key: demo-admins' -d '{"name":"Admins","description":"Demo administrators"}'
  api -X PUT "$base/acme/groups/admins/members/jdoe" -H 'Idempotency-Key: demo-admins-jdoe'
fi

cat <<MSG

ssodir is running (data and logs in $data/, Ctrl-C stops everything).

  command API    http://$SSO_COMMAND_ADDR      (OpenAPI: /openapi.json)
  query API      http://$SSO_QUERY_ADDR
  web console    $(scripts/console-link.sh)
                 (signs in once, within a minute; scripts/console-link.sh prints a fresh link)
  projector      http://$SSO_PROJECTOR_ADDR/metrics
  keycloak-sync  http://$SSO_KEYCLOAK_SYNC_ADDR/metrics
  DynamoDB Local $endpoint

  demo tenant    system "demo", tenant "acme" (users jdoe, rroe; group Admins)
  SCIM base URL  http://$SSO_COMMAND_ADDR/scim/v2/demo/acme
                 (its token: ssodirctl scim-tokens create NAME --system demo --tenant acme)
  dev token      $token

  curl -H 'Authorization: Bearer $token' http://$SSO_QUERY_ADDR/v1/systems/demo/tenants/acme/users
MSG

# Supervise: when one process ends, say which, show the end of its log, and stop the rest.
while :; do
  for i in "${!pids[@]}"; do
    kill -0 "${pids[$i]}" 2>/dev/null && continue
    status=0
    wait "${pids[$i]}" 2>/dev/null || status=$?
    [ "${names[$i]}" = "DynamoDB Local" ] && status="unknown: not a child of this script"
    echo "${names[$i]} exited (status $status); its log is ${logs[$i]}; stopping the others" >&2
    tail -n 20 "${logs[$i]}" 2>/dev/null | sed 's/^/  | /' >&2 || true
    exit 1
  done
  sleep 0.5 &
  wait $! || true
done
