#!/usr/bin/env bash
# Before and after in one sitting: point ETL_BENCH_ETL_BIN here, and each
# `etl` call of a bench section runs every binary of AB_BINS (absolute
# paths, space-separated) in turn on the same arguments, each into an
# output of its own (the `--out delta:PATH` given, with the binary's name
# appended), under GNU time: `shape binary wall user sys maxrss_kb` lines
# appended to AB_LOG. Then the call itself runs the first binary, so the
# bench's own table is that build's. Delta outputs only (BENCHMARKS.md
# section 35).
set -u
out=$(printf '%s\n' "$*" | sed -n 's/.*--out delta:\([^ ]*\).*/\1/p')
shape=json
case "$*" in *typed*) shape=typed ;; esac
for bin in $AB_BINS; do
  name=$(basename "$bin")
  args=()
  for a in "$@"; do
    if [[ -n $out && $a == "delta:$out" ]]; then a="delta:$out-$name"; fi
    args+=("$a")
  done
  /usr/bin/time -a -o "$AB_LOG" -f "$shape $name %e %U %S %M" "$bin" "${args[@]}" >/dev/null 2>&1
  [[ -n $out ]] && rm -rf "$out-$name" "$out-${name}__"* 2>/dev/null
done
first=${AB_BINS%% *}
exec "$first" "$@"
