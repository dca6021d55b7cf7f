#!/usr/bin/env bash
# Installs, starts and stops Amazon DynamoDB Local, as shipped in the npm package
# amplify-dynamodb-simulator (pinned and checked against a sha256).
#
#   scripts/dynamodb-local.sh install            download and unpack into .cache/ (idempotent)
#   scripts/dynamodb-local.sh path               print the emulator folder (installs first)
#   scripts/dynamodb-local.sh start [PORT]       start on PORT (default: a free port), wait until
#                                                it answers, print its endpoint; in memory, or
#                                                with its tables in the directory
#                                                DYNAMODB_LOCAL_DB_PATH (shared by every
#                                                access key and region) when that is set
#   scripts/dynamodb-local.sh stop               stop the instance started by `start`
set -euo pipefail

PKG_VERSION=2.9.30
PKG_SHA256=3503ffac19f183407909fecdacf4db51ab1fdad1da7b2f177016670b2d80e4b9

root=$(cd "$(dirname "$0")/.." && pwd)
cache="${SSODIR_CACHE_DIR:-$root/.cache}/dynamodb-local-$PKG_VERSION"
state="${SSODIR_DATA_DIR:-$root/.data}"
pidfile="$state/dynamodb-local.pid"
portfile="$state/dynamodb-local.port"

die() { echo "dynamodb-local: $*" >&2; exit 1; }

install() {
  [ -f "$cache/emulator/DynamoDBLocal.jar" ] && return 0
  # Test packages start in parallel: one installs, the others wait for it.
  mkdir -p "$(dirname "$cache")"
  exec 9>"$cache.lock"
  flock 9
  [ -f "$cache/emulator/DynamoDBLocal.jar" ] && return 0
  command -v java >/dev/null 2>&1 || die "java is missing: install a Java 17 runtime (e.g. apt-get install openjdk-17-jre-headless)"
  command -v npm >/dev/null 2>&1 || die "npm is missing: install Node.js and npm (e.g. apt-get install npm)"
  local tmp; tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "amplify-dynamodb-simulator@$PKG_VERSION" >/dev/null) \
    || { rm -rf "$tmp"; die "npm pack amplify-dynamodb-simulator@$PKG_VERSION failed"; }
  local tgz="$tmp/amplify-dynamodb-simulator-$PKG_VERSION.tgz"
  local sum; sum=$(sha256sum "$tgz" | cut -d' ' -f1)
  [ "$sum" = "$PKG_SHA256" ] || { rm -rf "$tmp"; die "checksum mismatch for amplify-dynamodb-simulator@$PKG_VERSION: got $sum"; }
  tar -xzf "$tgz" -C "$tmp"
  mkdir -p "$(dirname "$cache")"
  rm -rf "$cache.partial"
  mkdir -p "$cache.partial"
  mv "$tmp/package/emulator" "$cache.partial/emulator"
  rm -rf "$cache"
  mv "$cache.partial" "$cache"
  rm -rf "$tmp"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null \
    || echo $((20000 + RANDOM % 20000))
}

wait_ready() {
  local port=$1 i
  for i in $(seq 1 150); do
    if curl -s -o /dev/null -X POST "http://127.0.0.1:$port" \
        -H 'Content-Type: application/x-amz-json-1.0' -H 'X-Amz-Target: DynamoDB_20120810.ListTables' \
        -H 'Authorization: AWS4-HMAC-SHA256 Credential=local/20200101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=x' \
        -d '{}'; then
      return 0
    fi
    sleep 0.1
  done
  return 1
}

start() {
  install
  command -v curl >/dev/null 2>&1 || die "curl is missing"
  local port=${1:-$(free_port)}
  mkdir -p "$state"
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    echo "http://127.0.0.1:$(cat "$portfile")"; return 0
  fi
  local storage=(-inMemory)
  if [ -n "${DYNAMODB_LOCAL_DB_PATH:-}" ]; then
    mkdir -p "$DYNAMODB_LOCAL_DB_PATH"
    storage=(-dbPath "$(cd "$DYNAMODB_LOCAL_DB_PATH" && pwd)" -sharedDb)
  fi
  (cd "$cache/emulator" && exec java -Xmx${DYNAMODB_LOCAL_XMX:-2g} -Djava.library.path=./DynamoDBLocal_lib \
      -jar DynamoDBLocal.jar "${storage[@]}" -disableTelemetry -port "$port") >"$state/dynamodb-local.log" 2>&1 &
  echo $! >"$pidfile"
  echo "$port" >"$portfile"
  wait_ready "$port" || { stop; die "did not answer on port $port (see $state/dynamodb-local.log)"; }
  echo "http://127.0.0.1:$port"
}

stop() {
  [ -f "$pidfile" ] || return 0
  local pid; pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$pidfile" "$portfile"
}

case "${1:-}" in
  install) install ;;
  path) install; echo "$cache/emulator" ;;
  start) shift; start "$@" ;;
  stop) stop ;;
  *) echo "usage: $0 install|path|start [PORT]|stop" >&2; exit 2 ;;
esac
