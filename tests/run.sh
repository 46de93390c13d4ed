#!/usr/bin/env bash
# The whole test suite, on a fresh machine with Rust, Node.js and npm: tests/setup.sh installs
# what else the tests need (or stops before building, naming what is missing), then the Rust
# tests (unit, examples, differential against real pi, hostile extensions, server, browser)
# and the JavaScript tests of the guest's virtual modules run.
set -euo pipefail
cd "$(dirname "$0")/.."

# Sourced: its PATH (the rg and fd pi's tools need) holds for the tests.
source tests/setup.sh

echo "== cargo test"
# --no-fail-fast: one failing suite does not hide the ones after it.
cargo test --workspace --locked --no-fail-fast

echo "== the corpus against pi 1.6.0 (docs/COMPATIBILITY-1.6.md; cargo test ran it against 0.73.1)"
CORPUS_PI=1.6.0 cargo test --locked -p pichamber --test corpus -- compatibility_table

echo "== node --test (guest virtual modules)"
node --import ./tests/js/register.mjs --test tests/js/
