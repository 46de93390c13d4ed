#!/usr/bin/env bash
# schemathesis (PyPI) against `pichamber serve`'s own OpenAPI document, bounded: every route
# with generated requests, checked against what the document says (status codes, bodies,
# content types, accepted and refused input). CI runs it after the tests; by hand, more
# examples: ST_EXAMPLES=500 tests/schemathesis.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v st >/dev/null || { echo "tests/schemathesis.sh: schemathesis is required (pip install schemathesis==4.32.5)" >&2; exit 1; }
bin=${PICHAMBER_BIN:-${CARGO_TARGET_DIR:-target}/debug/pichamber}
[ -x "$bin" ] || { echo "tests/schemathesis.sh: no pichamber binary at $bin (cargo build)" >&2; exit 1; }
work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
token="schemathesis-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
cat > "$work/serve.toml" <<TOML
listen = "127.0.0.1:0"
data_dir = "data"
extensions = ["$PWD/extensions/card-demo", "$PWD/extensions/dialogs"]

[[users]]
name = "fuzz"
token = "$token"
TOML
PICHAMBER_CACHE_DIR="$work/cache" "$bin" serve --config "$work/serve.toml" > "$work/url" 2> "$work/serve.log" &
server=$!
for _ in $(seq 100); do [ -s "$work/url" ] && break; sleep 0.1; done
base=$(head -1 "$work/url" | tr -d '\r\n')
base=${base%/}
echo "== schemathesis against $base"
config="$PWD/tests/schemathesis/schemathesis.toml"
cd "$work" # schemathesis keeps its state (.schemathesis/) in the current folder
st --config-file "$config" run "$base/api/pi/openapi.json" \
  -H "Authorization: Bearer $token" \
  --max-examples "${ST_EXAMPLES:-25}" --seed "${ST_SEED:-1}" --no-color
