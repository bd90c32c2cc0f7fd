#!/usr/bin/env bash
# Benchmarks `kpack-pack wheel split` (release build), not a test: it prints
# figures and never fails on them. Each benchmark can be run alone by name:
#
#   - fixture: the jax ROCm plugin wheel, and
#   - big: a synthetic wheel of at least 2 GiB made from it
#     (make_big_wheel.py: its libraries, 20 more copies of the fat ones,
#     and large filler members), each with 1 and 2 threads: wall time
#     (hyperfine, median of 5 runs, 3 for the big wheel, after a warm-up)
#     and peak RSS (GNU time, /usr/bin/time -v);
#   - pjrt: jax_rocm7_pjrt 0.10.0 from PyPI (137 MB; its 520 MB
#     xla_rocm_plugin.so) on 2 threads against its floor, the sum of
#     `kpack-pack split` of the .so and `pigz -6 -p 2` of the host-only .so
#     that split writes: medians of 5 runs after a warm-up, their ratio,
#     peak RSS, and the host-only .so's deflated size against pigz's;
#   - onnxruntime, aiter: onnxruntime-rocm 1.22.2.post3 (57 MB; a 513 MB
#     provider library, 760 code objects) and amd-aiter 0.1.7.post2.dev18
#     (40 MB; 9,111 members, 2,613 loose code objects routed by content),
#     from the tests' download cache (./test.sh fetches them), on 2
#     threads against their floor: `unzip -q` of the wheel plus
#     `pigz -6 -p 2` of the same members (tar'd, one stream): medians of 5
#     runs after a warm-up, their ratio, and peak RSS.
#
#   bash crates/kpack-packer/benches/wheel.sh [WORK_DIR [fixture|big|pjrt|onnxruntime|aiter...]]
set -euo pipefail
cd "$(dirname "$0")/../../.."

for tool in hyperfine /usr/bin/time pigz unzip; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hyperfine time pigz unzip >/dev/null
        break
    fi
done

work=${1:-$(mktemp -d /tmp/kpack-wheel-bench.XXXXXX)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
shift || true
benchmarks=(fixture big pjrt onnxruntime aiter)
downloads=${KPACK_TEST_DOWNLOADS:-${XDG_CACHE_HOME:-$HOME/.cache}/rocm-kpack-get/test-downloads}
[ $# -gt 0 ] && benchmarks=("$@")
fixture=${KPACK_FIXTURES:-../shared/fixtures}/pypi/jax_rocm7_plugin-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl

cargo build --quiet --release -p kpack-packer --bin kpack-pack
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
pack="$target_dir/release/kpack-pack"

peak() { # peak RSS in MiB of the command
    /usr/bin/time -v "$@" 2>&1 >/dev/null | sed -n 's/.*Maximum resident set size (kbytes): //p' | awk '{printf "%d", $1 / 1024}'
}

# threads INPUT RUNS: `wheel split` of INPUT with 1 and 2 threads.
threads() {
    local input=$1 runs=$2
    local label
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
        echo "peak RSS, $threads thread(s): $(peak env RAYON_NUM_THREADS=$threads "$pack" wheel split "$input" -o "$work/out") MiB"
    done
    host=$(stat -c %s "$work/out/$(basename "$input")")
    devices=$(ls "$work/out" | grep -c _device_)
    echo "host wheel: $host bytes; $devices device wheels, $(du -cb "$work"/out/*_device_* | tail -1 | cut -f1) bytes"
}

# The wheel split of jax_rocm7_pjrt against the split of its library plus
# pigz of the host-only library.
pjrt() {
    local dir=$work/pjrt
    local wheel=$dir/jax_rocm7_pjrt-0.10.0-py3-none-manylinux_2_28_x86_64.whl
    [ -f "$wheel" ] || python3 -m pip download --quiet --no-deps --only-binary=:all: \
        --python-version 3.11 --platform manylinux_2_28_x86_64 jax_rocm7_pjrt==0.10.0 -d "$dir"
    local member=jax_plugins/xla_rocm7/xla_rocm_plugin.so
    local plugin=$dir/$member
    [ -f "$plugin" ] || unzip -q -o "$wheel" "$member" -d "$dir"
    local host=$dir/split/xla_rocm_plugin.so
    [ -f "$host" ] || "$pack" split "$plugin" -o "$dir/split" >/dev/null
    echo
    echo "== jax_rocm7_pjrt 0.10.0: $(stat -c %s "$wheel") bytes; host-only .so $(stat -c %s "$host") bytes; 2 threads"
    hyperfine --warmup 1 --runs 5 -N --export-json "$work/pjrt.json" \
        --prepare "rm -rf $work/out" \
        "env RAYON_NUM_THREADS=2 $pack wheel split $wheel -o $work/out" \
        "env RAYON_NUM_THREADS=2 $pack split $plugin -o $work/out" \
        "pigz -6 -p 2 -c $host" >/dev/null
    python3 - "$work/pjrt.json" <<'PY'
import json, statistics, sys
wheel, split, pigz = (statistics.median(r["times"]) for r in json.load(open(sys.argv[1]))["results"])
floor = split + pigz
print(f"median: wheel split {wheel:.2f} s; split of the .so {split:.2f} s + pigz -6 -p 2 "
      f"{pigz:.2f} s = {floor:.2f} s; ratio {wheel / floor:.2f} (goal: at most 1.10)")
PY
    rm -rf "$work/out"
    local rss_wheel rss_split rss_pigz
    rss_wheel=$(peak env RAYON_NUM_THREADS=2 "$pack" wheel split "$wheel" -o "$work/out")
    rm -rf "$work/out"
    rss_split=$(peak env RAYON_NUM_THREADS=2 "$pack" split "$plugin" -o "$work/out")
    rss_pigz=$(peak pigz -6 -p 2 -c "$host")
    echo "peak RSS: wheel split $rss_wheel MiB, split of the .so $rss_split MiB, pigz $rss_pigz MiB"
    rm -rf "$work/out"
    "$pack" wheel split "$wheel" -o "$work/out" >/dev/null
    local deflated
    deflated=$(unzip -v "$work/out/$(basename "$wheel")" "$member" | awk -v m="$member" '$NF == m {print $3}')
    echo "host wheel: $(stat -c %s "$work/out/$(basename "$wheel")") bytes; host-only .so deflated to $deflated bytes, pigz -6 to $(pigz -6 -p 2 -c "$host" | wc -c)"
}

# The wheel split of a wheel from the download cache against its floor:
# unzipping it and deflating the same members with pigz.
against_floor() {
    local name=$1 wheel=$downloads/$2
    if [ ! -f "$wheel" ]; then
        echo "$wheel is missing: ./test.sh fetches it" >&2
        exit 1
    fi
    local floor="sh -c 'rm -rf $work/unzipped && unzip -q $wheel -d $work/unzipped && tar -cf - -C $work/unzipped . | pigz -6 -p 2 >/dev/null'"
    echo
    echo "== $name: $(stat -c %s "$wheel") bytes, $(unzip -Z1 "$wheel" | wc -l) members; 2 threads"
    hyperfine --warmup 1 --runs 5 -N --export-json "$work/$name.json" \
        --prepare "rm -rf $work/out" \
        "env RAYON_NUM_THREADS=2 $pack wheel split $wheel -o $work/out" \
        "$floor" >/dev/null
    python3 - "$work/$name.json" <<'PY'
import json, statistics, sys
wheel, floor = (statistics.median(r["times"]) for r in json.load(open(sys.argv[1]))["results"])
print(f"median: wheel split {wheel:.2f} s; unzip -q + pigz -6 -p 2 {floor:.2f} s; ratio {wheel / floor:.2f}")
PY
    rm -rf "$work/out"
    local rss_wheel rss_unzip rss_pigz
    rss_wheel=$(peak env RAYON_NUM_THREADS=2 "$pack" wheel split "$wheel" -o "$work/out")
    rm -rf "$work/unzipped"
    rss_unzip=$(peak unzip -q "$wheel" -d "$work/unzipped")
    rss_pigz=$(peak sh -c "tar -cf - -C $work/unzipped . | pigz -6 -p 2")
    echo "peak RSS: wheel split $rss_wheel MiB (bound: 256 MiB), unzip $rss_unzip MiB, tar | pigz $rss_pigz MiB"
    echo "output: host wheel $(stat -c %s "$work/out/$(basename "$wheel")") bytes, $(ls "$work/out" | grep -c _device_) device wheels, $(du -cb "$work"/out/*_device_* | tail -1 | cut -f1) bytes"
    rm -rf "$work/out" "$work/unzipped"
}

echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for benchmark in "${benchmarks[@]}"; do
    case "$benchmark" in
    fixture) threads "$fixture" 5 ;;
    big)
        big="$work/big/jax_rocm7_plugin-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl"
        if [ ! -f "$big" ]; then
            mkdir -p "$work/big"
            python3 crates/kpack-packer/benches/make_big_wheel.py "$fixture" "$big"
        fi
        threads "$big" 3
        ;;
    pjrt) pjrt ;;
    onnxruntime) against_floor onnxruntime onnxruntime_rocm-1.22.2.post3-cp312-cp312-manylinux_2_34_x86_64.whl ;;
    aiter) against_floor aiter amd_aiter-0.1.7.post2.dev18-py3-none-any.whl ;;
    *) echo "unknown benchmark $benchmark (fixture, big, pjrt, onnxruntime or aiter)" >&2 && exit 2 ;;
    esac
done
