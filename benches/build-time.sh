#!/usr/bin/env bash
# What a retry-only user pays to build us, against backon + backon-macros
# (issue 17; BENCHMARKS.md section 10). Three one-function binaries of the
# same shape, each built cold (empty target dir, debug, the machine's cores),
# best of N:
#   base   tokio with its macros and a #[tokio::main] that calls one async fn
#   backon base + backon + backon-macros: the fn is #[backon]
#   etl    base + etl-core (default-features = false, features = ["macros"]):
#          the fn is #[retry], and main also calls with_retry and
#          Retry::run_with_report
# and prints each one's build time, what it adds to base, and the crates it
# compiles. Sources are fetched first (not timed). Run from anywhere:
#   benches/build-time.sh [runs, default 2]
# ETL_CORE_DIR=<an etl-core checkout> measures that one instead of ours.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
core=${ETL_CORE_DIR:-$repo/etl-core}
runs=${1:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

write() { # name, extra [dependencies] lines, main.rs
  mkdir -p "$work/$1/src"
  cat > "$work/$1/Cargo.toml" <<TOML
[package]
name = "probe-$1"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
tokio = { version = "1", default-features = false, features = ["macros", "rt", "time"] }
$2

[workspace]
TOML
  printf '%s\n' "$3" > "$work/$1/src/main.rs"
}

write base "" '
async fn fetch(n: u32) -> Result<u32, std::io::Error> {
    Ok(n + 1)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    println!("{:?}", fetch(1).await);
}'

write backon 'backon = { version = "1", default-features = false, features = ["std", "tokio-sleep"] }
backon-macros = "1"' '
use backon_macros::backon;

#[backon]
async fn fetch(n: u32) -> Result<u32, std::io::Error> {
    Ok(n + 1)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    println!("{:?}", fetch(1).await);
}'

write etl "etl-core = { path = \"$core\", default-features = false, features = [\"macros\"] }" '
use etl_core::retry::{Retry, Stop};
use etl_core::{retry, with_retry, EtlError, RetryPolicy};

#[retry(max_attempts = 3, base = "10ms")]
async fn fetch(n: u32) -> Result<u32, EtlError> {
    Ok(n + 1)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    println!("{:?}", fetch(1).await);
    println!("{:?}", with_retry(RetryPolicy::default(), || fetch(2)).await);
    let (n, report) = Retry::new(RetryPolicy::default()).run_with_report(|| fetch(3)).await;
    assert!(matches!(report.stop, Stop::Succeeded));
    println!("{n:?} after {} attempt(s)", report.attempts);
}'

declare -A best crates
for name in base backon etl; do
  (cd "$work/$name" && cargo fetch -q)
  for _ in $(seq "$runs"); do
    rm -rf "$work/$name/target"
    start=$(date +%s.%N)
    (cd "$work/$name" && cargo build -q --offline)
    t=$(echo "$(date +%s.%N) - $start" | bc)
    if [[ -z ${best[$name]:-} ]] || (( $(echo "$t < ${best[$name]}" | bc) )); then best[$name]=$t; fi
  done
  crates[$name]=$(cd "$work/$name" && cargo tree -q --offline -e normal,build --prefix none \
    | sed 's/ (\*)$//' | sort -u | wc -l)
  (cd "$work/$name" && cargo run -q --offline >/dev/null)
done
printf '| probe | cold debug build (best of %s) | added to base | crates | added crates |\n|---|---:|---:|---:|---:|\n' "$runs"
for name in base backon etl; do
  printf '| %s | %.2f s | %+.2f s | %d | %+d |\n' "$name" "${best[$name]}" \
    "$(echo "${best[$name]} - ${best[base]}" | bc)" "${crates[$name]}" "$((crates[$name] - crates[base]))"
done
echo
echo "crates the etl probe compiles beyond base:"
comm -13 <(cd "$work/base" && cargo tree -q --offline -e normal,build --prefix none | sed 's/ (\*)$//' | sort -u) \
         <(cd "$work/etl" && cargo tree -q --offline -e normal,build --prefix none | sed 's/ (\*)$//' | sort -u)
