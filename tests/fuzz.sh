#!/usr/bin/env bash
# Bounded fuzzing of the WIT-boundary decoders, tool-argument validation, the GUI descriptor
# validator, the bundler and the session-file parser (fuzz/, cargo fuzz
# with libFuzzer). CI runs each target for FUZZ_SECONDS (default 60) from the committed seeds
# and prints how many inputs it tried; a crash fails the run and leaves the input in
# fuzz/artifacts/. By hand, run longer: FUZZ_SECONDS=3600 tests/fuzz.sh
#
# The machine has one (stable) Rust toolchain; cargo fuzz's unstable flags are allowed with
# RUSTC_BOOTSTRAP=1, and the targets are built without a sanitizer (safe Rust: what is sought
# is a panic, a hang or runaway memory, which libFuzzer reports).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds=${FUZZ_SECONDS:-60}
command -v cargo-fuzz >/dev/null || { echo "tests/fuzz.sh: cargo-fuzz is required (cargo install cargo-fuzz --locked)" >&2; exit 1; }
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR=${FUZZ_TARGET_DIR:-${CARGO_TARGET_DIR:-../target}/fuzz}
cargo fuzz build --sanitizer none -O
for target in boundary tool_arguments descriptor bundler session_file; do
  mkdir -p "corpus/$target"
  cp -n seeds/"$target"/* "corpus/$target/" 2>/dev/null || true
  echo "== fuzz $target for ${seconds}s"
  cargo fuzz run --sanitizer none -O "$target" "corpus/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 2>&1 \
    | grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)|ERROR|panicked|SUMMARY' || true
  # libFuzzer exits non-zero and writes an artifact on a crash, timeout or OOM.
  if compgen -G "artifacts/$target/*" >/dev/null; then
    echo "fuzz: $target found a failing input:" >&2
    ls "artifacts/$target" >&2
    exit 1
  fi
done
