#!/usr/bin/env bash
# Benchmarks `kpack-pack wheel split` (release build) on the jax ROCm plugin
# wheel and on a synthetic wheel of at least 2 GiB made from it
# (make_big_wheel.py: its libraries, 20 more copies of the fat ones, and
# large filler members), with 1 and 2 threads: wall time (hyperfine, median
# of 5 runs, 3 for the big wheel, after a warm-up) and peak RSS (GNU time,
# /usr/bin/time -v). Not a test: it prints figures and never fails on them.
#
#   bash crates/kpack-packer/benches/wheel.sh [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/../../.."

for tool in hyperfine /usr/bin/time; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hyperfine time >/dev/null
        break
    fi
done

work=${1:-$(mktemp -d /tmp/kpack-wheel-bench.XXXXXX)}
mkdir -p "$work"
fixture=${KPACK_FIXTURES:-../shared/fixtures}/pypi/jax_rocm7_plugin-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl

cargo build --quiet --release -p kpack-packer --bin kpack-pack
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
pack="$target_dir/release/kpack-pack"

big="$work/big/jax_rocm7_plugin-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl"
if [ ! -f "$big" ]; then
    mkdir -p "$work/big"
    python3 crates/kpack-packer/benches/make_big_wheel.py "$fixture" "$big"
fi

echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for input in "$fixture" "$big"; do
    runs=5
    [ "$input" = "$big" ] && runs=3
    label=$(basename "$(dirname "$input")")
    echo
    echo "== $label/$(basename "$input"): $(stat -c %s "$input") bytes"
    hyperfine --warmup 1 --runs "$runs" -N --export-json "$work/$label.json" \
        --prepare "rm -rf $work/out" \
        "env RAYON_NUM_THREADS=1 $pack wheel split $input -o $work/out" \
        "env RAYON_NUM_THREADS=2 $pack wheel split $input -o $work/out" \
        | grep -E 'Benchmark|Time|faster'
    python3 - "$work/$label.json" <<'PY'
import json, statistics, sys
results = json.load(open(sys.argv[1]))["results"]
medians = [statistics.median(r["times"]) for r in results]
print(f"median 1 thread {medians[0]:.3f} s, 2 threads {medians[1]:.3f} s")
PY
    for threads in 1 2; do
        rm -rf "$work/out"
        rss=$( { /usr/bin/time -v env RAYON_NUM_THREADS=$threads "$pack" wheel split "$input" -o "$work/out" >/dev/null; } 2>&1 \
            | sed -n 's/.*Maximum resident set size (kbytes): //p')
        echo "peak RSS, $threads thread(s): $((rss / 1024)) MiB"
    done
    host=$(stat -c %s "$work/out/$(basename "$input")")
    devices=$(ls "$work/out" | grep -c _device_)
    echo "host wheel: $host bytes; $devices device wheels, $(du -cb "$work"/out/*_device_* | tail -1 | cut -f1) bytes"
done
