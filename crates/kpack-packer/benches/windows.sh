#!/usr/bin/env bash
# Splitting a PE image (not run by CI): wall time (hyperfine median of 5
# runs after a warm-up) and peak RSS (GNU time) of `kpack-pack split` with
# 1 and 2 threads on a synthetic DLL holding 1 GiB of device code in 8
# uncompressed bundles (the `make_big_dll` example), next to its floor:
# `zstd -3 -T2` of its `.hip_fat` bytes. Not a test: it prints figures and
# never fails on them.
#
#   bash crates/kpack-packer/benches/windows.sh [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/../../.."

for tool in hyperfine /usr/bin/time zstd; do
    command -v "$tool" >/dev/null || {
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hyperfine time zstd >/dev/null
        break
    }
done
work=${1:-$(mktemp -d /tmp/kpack-windows-bench.XXXXXX)}
mkdir -p "$work"
work=$(cd "$work" && pwd)

cargo build --quiet --release -p kpack-packer --bin kpack-pack --example make_big_dll
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
pack="$target_dir/release/kpack-pack"
[ -f "$work/big.dll" ] || "$target_dir/release/examples/make_big_dll" "$work" >/dev/null

echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "big.dll: $(stat -c %s "$work/big.dll") bytes, .hip_fat $(stat -c %s "$work/hip_fat.bin") bytes"
hyperfine --warmup 1 --runs 5 -N --export-json "$work/split.json" \
    --prepare "rm -rf $work/out" \
    "env RAYON_NUM_THREADS=1 $pack split $work/big.dll -o $work/out" \
    "env RAYON_NUM_THREADS=2 $pack split $work/big.dll -o $work/out" \
    "zstd -3 -T2 -q -f $work/hip_fat.bin -o $work/hip_fat.zst" |
    grep -E 'Benchmark|Time'
python3 - "$work/split.json" <<'PY'
import json, statistics, sys
results = json.load(open(sys.argv[1]))["results"]
one, two, floor = (statistics.median(r["times"]) for r in results)
print(f"median: split 1 thread {one:.3f} s, 2 threads {two:.3f} s; zstd -3 -T2 {floor:.3f} s")
print(f"split (2 threads) / zstd -3 -T2: {two / floor:.2f}x")
PY
for threads in 1 2; do
    rm -rf "$work/out"
    rss=$( { /usr/bin/time -v env RAYON_NUM_THREADS=$threads "$pack" split "$work/big.dll" -o "$work/out" >/dev/null; } 2>&1 |
        sed -n 's/.*Maximum resident set size (kbytes): //p')
    echo "peak RSS, $threads thread(s): $((rss / 1024)) MiB"
done
du -sb "$work/out/.kpack" | awk '{print "archives: " $1 " bytes"}'
stat -c 'host-only DLL: %s bytes' "$work/out/big.dll"
