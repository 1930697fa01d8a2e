#!/usr/bin/env bash
# A short libFuzzer run of every fuzz target, for CI (tests/libfuzzer.rs calls it when
# cargo-fuzz is installed). Stable toolchain with RUSTC_BOOTSTRAP=1 (cargo-fuzz passes
# nightly-only flags) and no sanitizer (AddressSanitizer needs nightly's runtime); Rust's
# own checks (bounds, overflow, debug assertions) still turn bugs into crashes.
#
#   A2A_FUZZ_SECONDS   seconds per target (default 5)
#   A2A_FUZZ_TARGET_DIR  where the instrumented build goes (default
#                      /var/tmp/a2a-gateway-fuzz-target): a release build of every
#                      dependency takes minutes, so it is cached on the machine, not in the
#                      checkout (CI starts from a clean one)
#
# New inputs go to a scratch directory: the checked-in corpus stays as it is. A crash
# leaves its input in fuzz/artifacts/<target>/ and fails the script.
set -euo pipefail
cd "$(dirname "$0")"

seconds="${A2A_FUZZ_SECONDS:-5}"
export CARGO_TARGET_DIR="${A2A_FUZZ_TARGET_DIR:-/var/tmp/a2a-gateway-fuzz-target}"
export RUSTC_BOOTSTRAP=1
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

started=$(date +%s)
cargo fuzz build --sanitizer none
echo "fuzz: build took $(( $(date +%s) - started )) s"

for target in $(cargo fuzz list); do
  mkdir -p "$scratch/$target"
  # -timeout: an input that takes longer is a hang; -rss_limit_mb bounds memory.
  cargo fuzz run --sanitizer none "$target" "$scratch/$target" "corpus/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    2>"$scratch/$target.log" || { tail -n 60 "$scratch/$target.log"; exit 1; }
  runs=$(grep -m1 'stat::number_of_executed_units' "$scratch/$target.log" | awk '{print $2}')
  cov=$(grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE|INITED)' "$scratch/$target.log" | tail -n 1 | grep -o 'cov: [0-9]*' || true)
  echo "fuzz: $target: ${runs:-?} executions in ${seconds} s, ${cov:-cov: ?}"
done
