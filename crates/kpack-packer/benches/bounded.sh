#!/usr/bin/env bash
# Splitting in bounded memory (not run by CI): wall time (hyperfine median)
# and peak RSS (GNU time) of `kpack-pack split` and `kpack-pack wheel split`
# with 1 and 2 threads, each next to its floor, on
#
#   - jax_rocm7_pjrt 0.10.0 from PyPI (137 MB wheel; xla_rocm_plugin.so,
#     520 MB, 41 CCOB bundles);
#   - the tests' synthetic library: 2 GiB of device code in 16 CCOB v3
#     bundles (floor: `zstd -d` of the bundles plus `zstd -3 -T2` of what
#     they hold; beside it `md5sum` of what they hold, the MD5 check every
#     split of a compressed bundle makes);
#   - Debian 12's librocsparse0 5.3.0 (1.3 GB, uncompressed bundles; floor:
#     `zstd -3 -T2` of its .hip_fatbin).
#
# BASELINE=path/to/an/older/kpack-pack adds its figures, measured in the
# same run, to compare with.
#
#   bash crates/kpack-packer/benches/bounded.sh [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/../../.."

for tool in hyperfine /usr/bin/time zstd objcopy dpkg-deb unzip; do
    command -v "$tool" >/dev/null || {
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hyperfine time zstd binutils dpkg unzip >/dev/null
        break
    }
done
work=${1:-$(mktemp -d /tmp/kpack-bounded.XXXXXX)}
mkdir -p "$work"
work=$(cd "$work" && pwd)

cargo build --quiet --release -p kpack-packer --bin kpack-pack --example make_big_library
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
packs=("$target_dir/release/kpack-pack")
[ -n "${BASELINE:-}" ] && packs+=("$BASELINE")
label() { if [ "$1" = "${packs[0]}" ]; then echo this; else echo baseline; fi; }

# The inputs, fetched once.
wheel=$work/jax_rocm7_pjrt-0.10.0-py3-none-manylinux_2_28_x86_64.whl
[ -f "$wheel" ] || python3 -m pip download --quiet --no-deps --only-binary=:all: \
    --python-version 3.11 --platform manylinux_2_28_x86_64 jax_rocm7_pjrt==0.10.0 -d "$work"
plugin=$work/pjrt/jax_plugins/xla_rocm7/xla_rocm_plugin.so
[ -f "$plugin" ] || unzip -q -o "$wheel" 'jax_plugins/xla_rocm7/xla_rocm_plugin.so' -d "$work/pjrt"
big=$work/big/libbig.so
[ -f "$big" ] || "$target_dir/release/examples/make_big_library" "$work/big" >/dev/null
rocsparse=$work/rocsparse/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1
if [ ! -f "$rocsparse" ]; then
    (cd "$work" && apt-get download librocsparse0=5.3.0+dfsg-2 >/dev/null 2>&1) || true
    deb=$(ls "$work"/librocsparse0_5.3.0*.deb 2>/dev/null | head -1)
    [ -n "$deb" ] && dpkg-deb -x "$deb" "$work/rocsparse"
fi

median() {
    python3 -c 'import json,statistics,sys; r=json.load(open(sys.argv[1]))["results"]; print(" ".join("%.2f" % statistics.median(x["times"]) for x in r))' "$1"
}
peak() { # peak RSS in MiB of the command
    /usr/bin/time -f %M -o "$work/time.txt" "$@" >/dev/null 2>&1
    awk '{printf "%d", $1 / 1024}' "$work/time.txt"
}

# measure NAME COMMAND...: for each kpack-pack and thread count, the median
# wall time of 3 runs and the peak RSS; {pack} and {out} in COMMAND are
# replaced.
measure() {
    local name=$1; shift
    for pack in "${packs[@]}"; do
        for threads in 1 2; do
            local command=("${@//\{pack\}/$pack}")
            command=("${command[@]//\{out\}/$work/out}")
            hyperfine --warmup 1 --runs 3 -N --export-json "$work/run.json" --prepare "rm -rf $work/out" \
                "env RAYON_NUM_THREADS=$threads ${command[*]}" >/dev/null
            rm -rf "$work/out"
            local rss
            rss=$(peak env RAYON_NUM_THREADS=$threads "${command[@]}")
            printf '%-34s %-9s %d thread(s): %6s s median, peak RSS %5s MiB\n' \
                "$name" "$(label "$pack")" \
                "$threads" "$(median "$work/run.json")" "$rss"
        done
    done
}

floor() { # floor NAME COMMAND: median wall time of a shell pipeline
    hyperfine --warmup 1 --runs 3 --export-json "$work/floor.json" "$2" >/dev/null
    printf '%-34s floor: %s s (%s)\n' "$1" "$(median "$work/floor.json")" "$2"
}

echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
measure "split xla_rocm_plugin.so" {pack} split "$plugin" -o {out}
measure "wheel split jax_rocm7_pjrt" {pack} wheel split "$wheel" -o {out}

measure "split libbig.so (2 GiB CCOB)" {pack} split "$big" -o {out}
raw=$work/big/code.bin
if [ ! -f "$raw" ]; then
    for bundle in "$work"/big/bundle*.ccob; do tail -c +33 "$bundle" | zstd -dc; done >"$raw"
fi
floor "libbig.so: zstd -d of the bundles" \
    "for b in $work/big/bundle*.ccob; do tail -c +33 \$b | zstd -dc >/dev/null; done"
floor "libbig.so: zstd -3 -T2 of the code" "zstd -3 -T2 -c $raw >/dev/null"
# Not in the floor, but every split does it: the bundles' MD5 check over all
# of their uncompressed bytes (one core; a split spreads it over the bundles).
floor "libbig.so: md5sum of the code" "md5sum $raw >/dev/null"

if [ -f "$rocsparse" ]; then
    measure "split librocsparse.so.0.1" {pack} split "$rocsparse" -o {out}
    fatbin=$work/rocsparse.fatbin
    [ -f "$fatbin" ] || objcopy -O binary --only-section=.hip_fatbin "$rocsparse" "$fatbin"
    floor "librocsparse: zstd -3 -T2 of .hip_fatbin" "zstd -3 -T2 -c $fatbin >/dev/null"
else
    echo "librocsparse0 5.3.0 not found: on Debian 12, apt-get download librocsparse0 into $work"
fi
