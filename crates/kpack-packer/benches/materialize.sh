#!/usr/bin/env bash
# Materializing with compressed bundles (not run by CI): jax's ROCm 10
# PJRT plugin (jax_rocm10_pjrt 0.12.0 from PyPI; xla_rocm_plugin.so, 45
# CCOB bundles for 27 targets) split, then materialized for gfx1100 plain
# and compressed. Prints the sizes against the original fat file, and the
# compressed materialization's median time (hyperfine, 5 runs) and peak RSS
# (GNU time) next to `zstd -d` + `zstd -19 -T2` of the gfx1100 code it
# holds (the plain materialization's .hip_fatbin).
#
#   bash crates/kpack-packer/benches/materialize.sh [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/../../.."

for tool in hyperfine /usr/bin/time zstd objcopy unzip; do
    command -v "$tool" >/dev/null || {
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hyperfine time zstd binutils unzip >/dev/null
        break
    }
done
work=${1:-$(mktemp -d /tmp/kpack-materialize-bench.XXXXXX)}
mkdir -p "$work"
work=$(cd "$work" && pwd)

cargo build --quiet --release -p kpack-packer --bin kpack-pack
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
pack="$target_dir/release/kpack-pack"

wheel=$work/jax_rocm10_pjrt-0.12.0-py3-none-manylinux_2_27_x86_64.whl
if [ ! -f "$wheel" ]; then
    python3 -m pip download --quiet --no-deps -d "$work" "jax_rocm10_pjrt==0.12.0"
fi
plugin=$work/xla_rocm_plugin.so
if [ ! -f "$plugin" ]; then
    unzip -q -o -j "$wheel" "*/xla_rocm_plugin.so" -d "$work"
fi
rm -rf "$work/split"
"$pack" split "$plugin" -o "$work/split" >/dev/null
host=$work/split/xla_rocm_plugin.so
"$pack" materialize "$host" -o "$work/plain.so" --target gfx1100 >/dev/null
"$pack" materialize "$host" -o "$work/compressed.so" --target gfx1100 --compress >/dev/null

echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for file in "$plugin" "$work/plain.so" "$work/compressed.so"; do
    printf '%-16s %12d bytes\n' "$(basename "$file")" "$(stat -c %s "$file")"
done

objcopy -O binary --only-section=.hip_fatbin "$work/plain.so" "$work/gfx1100.bin"
zstd -3 -q -f "$work/gfx1100.bin" -o "$work/gfx1100.zst"
hyperfine --warmup 1 --runs 5 -N --export-json "$work/materialize.json" \
    "$pack materialize $host -o $work/compressed.so --target gfx1100 --compress" \
    "$pack materialize $host -o $work/plain.so --target gfx1100" \
    "zstd -d -q -f $work/gfx1100.zst -o $work/gfx1100.out" \
    "zstd -19 -T2 -q -f $work/gfx1100.bin -o $work/gfx1100.19.zst" |
    grep -E 'Benchmark|Time'
python3 - "$work/materialize.json" <<'PY'
import json, statistics, sys
results = json.load(open(sys.argv[1]))["results"]
compressed, plain, decode, floor = (statistics.median(r["times"]) for r in results)
print(f"median: materialize --compress {compressed:.3f} s, plain {plain:.3f} s; "
      f"zstd -d {decode:.3f} s + zstd -19 -T2 {floor:.3f} s = {decode + floor:.3f} s")
PY
rss=$( { /usr/bin/time -v "$pack" materialize "$host" -o "$work/compressed.so" --target gfx1100 --compress >/dev/null; } 2>&1 |
    sed -n 's/.*Maximum resident set size (kbytes): //p')
echo "peak RSS, materialize --compress: $((rss / 1024)) MiB"
