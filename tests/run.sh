#!/usr/bin/env bash
# The whole test suite. Installs what the tests need (real pi 0.73.1 for the differential
# tests, the npm dependencies of the example extensions, the third-party extension packages
# of tests/thirdparty.rs), then runs the Rust tests (unit,
# examples, differential, failures) and the JavaScript tests of the guest's virtual modules.
set -euo pipefail
cd "$(dirname "$0")/.."

need() { command -v "$1" >/dev/null || { echo "tests/run.sh: $1 is required ($2)" >&2; exit 1; }; }
need cargo "install Rust with rustup"
need node "Node.js >= 20 runs real pi and the JS tests"
need npm "npm installs real pi"

npm_install() { # folder with package-lock.json
  if [ ! -d "$1/node_modules" ] || [ "$1/package-lock.json" -nt "$1/node_modules" ]; then
    echo "== npm ci in $1"
    npm ci --prefix "$1" --no-audit --no-fund --loglevel=error
    touch "$1/node_modules"
  fi
}
npm_install tests/oracle
npm_install tests/thirdparty
npm_install tests/browser # playwright-core: drives Debian's chromium (no browser download)
for lock in extensions/*/package-lock.json; do
  [ -e "$lock" ] && npm_install "$(dirname "$lock")"
done

echo "== cargo test"
cargo test --workspace --locked

echo "== node --test (guest virtual modules)"
node --import ./tests/js/register.mjs --test tests/js/
