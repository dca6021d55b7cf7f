#!/usr/bin/env bash
# Prints a web console link that signs in once, within a minute, with `make run`'s
# development token. The link holds a one-time code, never the token, so the copy the
# browser's history keeps signs no one in. Run it whenever you need a fresh link.
# Same as: SSODIR_TOKEN=$(cat .data/dev-token) bin/ssodirctl console-link --system demo --tenant acme
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
query="http://${SSO_QUERY_ADDR:-127.0.0.1:8081}"
tenant="${1:-demo/acme}"
data="${SSODIR_DATA_DIR:-$root/.data}"
token=$(cat "$data/dev-token" 2>/dev/null) || { echo "no $data/dev-token: start the services with make run" >&2; exit 1; }
answer=$(curl -fsS -X POST -H "Authorization: Bearer $token" "$query/console/dev-codes") ||
  { echo "the query API at $query did not mint a code: is make run running?" >&2; exit 1; }
code=$(printf '%s' "$answer" | sed -n 's/.*"code":"\([^"]*\)".*/\1/p')
[ -n "$code" ] || { echo "unexpected answer from $query: $answer" >&2; exit 1; }
echo "$query/console/#/signin?code=$code&tenant=$tenant"
