#!/usr/bin/env bash
# Benchmarks `kpack-pack split` (release build) on Debian's rocRAND library
# and on a synthetic 1.2 GB multi-TU library (100 bundles x rocRAND's 7 code
# objects, each copy distinct), with 1 and 2 threads: wall time (hyperfine,
# median of 5 runs after a warm-up) and peak RSS (GNU time, /usr/bin/time -v).
# Not a test: it prints figures and never fails on them.
#
#   bash crates/kpack-packer/benches/split.sh [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/../../.."

for tool in hyperfine /usr/bin/time dpkg-deb; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hyperfine time dpkg >/dev/null
        break
    fi
done

work=${1:-$(mktemp -d /tmp/kpack-split-bench.XXXXXX)}
mkdir -p "$work"
fixture=${KPACK_FIXTURES:-../shared/fixtures}/debian/librocrand1_5.3.3-4_amd64.deb

cargo build --quiet --release -p kpack-packer --bin kpack-pack --example make_fat_library
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
pack="$target_dir/release/kpack-pack"

dpkg-deb -x "$fixture" "$work/deb"
rocrand="$work/deb/usr/lib/x86_64-linux-gnu/librocrand.so.1.1"
if [ ! -f "$work/fat/libfat.so" ]; then
    "$target_dir/release/examples/make_fat_library" "$rocrand" 100 "$work/fat"
fi
synthetic="$work/fat/libfat.so"

echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for input in "$rocrand" "$synthetic"; do
    echo
    echo "== $(basename "$input"): $(stat -c %s "$input") bytes"
    hyperfine --warmup 1 --runs 5 -N --export-json "$work/$(basename "$input").json" \
        --prepare "rm -rf $work/out" \
        "env RAYON_NUM_THREADS=1 $pack split $input -o $work/out" \
        "env RAYON_NUM_THREADS=2 $pack split $input -o $work/out" \
        | grep -E 'Benchmark|Time|faster'
    python3 - "$work/$(basename "$input").json" <<'PY'
import json, statistics, sys
results = json.load(open(sys.argv[1]))["results"]
medians = [statistics.median(r["times"]) for r in results]
print(f"median 1 thread {medians[0]:.3f} s, 2 threads {medians[1]:.3f} s, speedup {medians[0] / medians[1]:.2f}x")
PY
    for threads in 1 2; do
        rm -rf "$work/out"
        rss=$( { /usr/bin/time -v env RAYON_NUM_THREADS=$threads "$pack" split "$input" -o "$work/out" >/dev/null; } 2>&1 \
            | sed -n 's/.*Maximum resident set size (kbytes): //p')
        echo "peak RSS, $threads thread(s): $((rss / 1024)) MiB"
    done
    du -sb "$work/out/.kpack" | awk '{print "archives: " $1 " bytes"}'
done
