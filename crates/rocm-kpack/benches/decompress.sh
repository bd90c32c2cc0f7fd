#!/usr/bin/env bash
# Decompression throughput of the kpack reader on real code objects, against
# the `zstd -d` command line tool on the very same zstd frames.
#
#   bash crates/rocm-kpack/benches/decompress.sh
#
# 1. Extracts librocrand.so.1.1 from the Debian rocRAND package fixture and
#    dumps its .hip_fatbin section (one uncompressed clang offload bundle).
# 2. Runs the `decompress/rocrand` part of the `archive` bench, which packs
#    every code object of the bundle into a zstd level 3 archive, times
#    Kernel::read_into (1 and 2 threads) and kpack_get_kernel, and writes the
#    archive's frames, concatenated, to frames.zst.
# 3. Times `zstd -d -c -q frames.zst > /dev/null` with hyperfine and prints
#    our single-threaded throughput as a ratio of zstd's.
#
# Environment: KPACK_ROCRAND_DEB (the .deb), CARGO_TARGET_DIR (default
# /tmp/bench-target), KEEP_WORK=1 to keep the temporary directory.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
deb=${KPACK_ROCRAND_DEB:-$root/../shared/fixtures/debian/librocrand1_5.3.3-4_amd64.deb}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/tmp/bench-target}

if ! command -v hyperfine >/dev/null || ! command -v zstd >/dev/null; then
    echo "installing hyperfine and zstd"
    if [ "$(id -u)" -eq 0 ]; then
        apt-get install -y hyperfine zstd >/dev/null ||
            { apt-get update >/dev/null && apt-get install -y hyperfine zstd >/dev/null; }
    else
        sudo apt-get install -y hyperfine zstd >/dev/null
    fi
fi
for tool in dpkg-deb objcopy hyperfine zstd jq; do
    command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done
[ -f "$deb" ] || { echo "no fixture at $deb (set KPACK_ROCRAND_DEB)" >&2; exit 1; }

work=$(mktemp -d /tmp/kpack-decompress.XXXXXX)
if [ "${KEEP_WORK:-0}" = 1 ]; then
    echo "keeping $work"
else
    trap 'rm -rf "$work"' EXIT
fi

dpkg-deb -x "$deb" "$work/root"
so="$work/root/usr/lib/x86_64-linux-gnu/librocrand.so.1.1"
objcopy -O binary --only-section=.hip_fatbin "$so" "$work/fatbin.bin"
echo "$(basename "$so"): .hip_fatbin is $(stat -c %s "$work/fatbin.bin") bytes"

cd "$root"
nice -n 0 cargo bench -p rocm-kpack --bench archive -- decompress \
    --bundle "$work/fatbin.bin" --frames-out "$work/frames.zst" --results "$work/results.txt"

result() { sed -n "s/^$1=//p" "$work/results.txt"; }
frames_bytes=$(result frames_decompressed_bytes)
[ "$(zstd -d -c -q "$work/frames.zst" | wc -c)" -eq "$frames_bytes" ] ||
    { echo "frames.zst does not decompress to $frames_bytes bytes" >&2; exit 1; }

echo
echo "=== zstd -d on the same frames ($(stat -c %s "$work/frames.zst") bytes -> $frames_bytes bytes) ==="
zstd --version
cd "$work"
# The second command decompresses an empty frame: the fixed cost of starting
# zstd, which the first includes and an in-process read does not.
printf '' | zstd -q -c > empty.zst
nice -n 0 hyperfine --warmup 3 --export-json "$work/hyperfine.json" \
    'zstd -d -c -q frames.zst > /dev/null' \
    'zstd -d -c -q empty.zst > /dev/null'
zstd_median=$(jq '.results[0].median' "$work/hyperfine.json")
empty_median=$(jq '.results[1].median' "$work/hyperfine.json")

echo
echo "=== decompression throughput (MB = 10^6 bytes; nice -n 0; load average in the bench output above) ==="
awk -v bytes="$frames_bytes" -v t="$zstd_median" \
    -v single="$(result single_mbps)" -v two="$(result two_thread_mbps)" \
    -v capi="$(result capi_mbps)" -v raw="$(result raw_zstd_mbps)" -v t0="$empty_median" '
BEGIN {
    zstd = bytes / t / 1e6
    printf "%-46s %9.1f MB/s\n", "Kernel::read_into, 1 thread", single
    printf "%-46s %9.1f MB/s  (%.2fx of 1 thread)\n", "Kernel::read_into, 2 threads (total)", two, two / single
    printf "%-46s %9.1f MB/s\n", "kpack_get_kernel (C ABI), 1 thread", capi
    printf "%-46s %9.1f MB/s\n", "libzstd in-process, no archive", raw
    printf "%-46s %9.1f MB/s  (median %.2f ms, process start included)\n", "zstd -d -c -q frames.zst > /dev/null", zstd, t * 1e3
    if (t > t0) {
        net = bytes / (t - t0) / 1e6
        printf "%-46s %9.1f MB/s  (minus %.2f ms to start zstd on an empty frame)\n", "zstd -d, start-up subtracted", net, t0 * 1e3
    }
    printf "%-46s %9.3f  (goal: >= 0.85)\n", "ratio read_into 1 thread / zstd -d", single / zstd
    if (t > t0) printf "%-46s %9.3f\n", "ratio read_into 1 thread / zstd -d start-up subtracted", single / net
    printf "%-46s %9.3f\n", "ratio kpack_get_kernel / zstd -d", capi / zstd
    printf "%-46s %9.3f\n", "ratio read_into 1 thread / libzstd in-process", single / raw
}'
