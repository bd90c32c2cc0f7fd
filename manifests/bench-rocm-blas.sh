#!/usr/bin/env bash
# The whole rocm-blas flow on Debian 13's real librocblas0 5.5.1 (not run by
# CI: the package is 166 MB; README.md says how to fetch it). It publishes
# the package with `kpack-repo build` (timed, peak memory), installs it with
# `kpack-get` for one GPU from the repository directory, and prints: the
# package's size, the host tree, each archive and payload, what that GPU's
# user downloads and installs, and the split library's markers checked
# through the runtime's loader against the original fat library's bundles.
#
#   manifests/bench-rocm-blas.sh DIR_WITH_THE_DEB [TARGET]   (default gfx1100)
set -euo pipefail
cd "$(dirname "$0")/.."

sources=${1:?usage: $0 DIR_WITH_THE_DEB [TARGET]}
target=${2:-gfx1100}
deb="$sources/librocblas0_5.5.1+dfsg-7_amd64.deb"
[ -f "$deb" ] || { echo "$deb not found (see manifests/README.md)" >&2; exit 1; }
work=${BENCH_WORK:-bench-out/rocm-blas}

cargo build --quiet --release -p kpack-repo -p rocm-kpack-get -p kpack-packer
repo_tool=$PWD/target/release/kpack-repo
get=$PWD/target/release/kpack-get
pack=$PWD/target/release/kpack-pack
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)

mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
size_of() { stat -c %s "$1"; }

echo "== the package"
installed=$(dpkg-deb -f "$deb" Installed-Size)
echo "deb: $(mib "$(size_of "$deb")"); installed: $(mib $((installed * 1024)))"

echo
echo "== kpack-repo build (wall time, peak RSS)"
"$repo_tool" keygen "$work/key" --unencrypted >/dev/null
/usr/bin/time -f "build: %e s, peak RSS %M KiB" \
    "$repo_tool" build "$work/repo" manifests/rocm-blas.toml --sources "$sources" --secret-key "$work/key.key"

echo
echo "== what was published"
for file in "$work"/repo/pool/rocm-blas/5.5.1/*; do
    printf '%12s  %s\n' "$(mib "$(size_of "$file")")" "$(basename "$file")"
done

for tool in hyperfine zstd objcopy; do
    command -v "$tool" >/dev/null || { echo "$tool not found (apt-get install hyperfine zstd binutils)" >&2; exit 1; }
done

echo
echo "== kpack-get install rocm-blas --target $target (kpack layout)"
KPACK_GET_CACHE_DIR="$work/cache" KPACK_GET_STATE_DIR="$work/state" \
    "$get" --repo "rocm=file://$work/repo" --key "$work/key.pub" \
    --prefix "$work/prefix" --target "$target" --layout kpack --no-progress --json \
    install rocm-blas > "$work/install.json"
downloaded=$(du -cb "$work"/cache/blobs/* | tail -1 | cut -f1)
installed_bytes=$(du -sb --exclude=.lock "$work/prefix" | cut -f1)
echo "downloaded: $(mib "$downloaded") ($(awk -v d="$downloaded" -v p="$(size_of "$deb")" 'BEGIN { printf "%.0f%%", 100 * d / p }') of the deb)"
echo "installed:  $(mib "$installed_bytes") ($(awk -v i="$installed_bytes" -v p="$((installed * 1024))" 'BEGIN { printf "%.0f%%", 100 * i / p }') of the package installed)"

echo
echo "== the split library's markers, through the runtime's loader"
# Debian 13's librocblas.so needs glibc 2.38, so on Debian 12 it cannot be
# dlopened: every wrapper's marker is handed to the loader directly, and
# each code object compared with the original library's bundle.
mkdir -p "$work/original"
dpkg-deb -x "$deb" "$work/original"
"$pack" verify "$work/prefix/lib" --target "$target" \
    --original "$work/original/usr/lib/x86_64-linux-gnu/librocblas.so.0.1" | tail -3

echo
echo "== materializing librocblas.so.0.1 for $target (the fat layout)"
host="$work/prefix/lib/librocblas.so.0.1"
fat="$work/materialized.so"
"$pack" materialize "$host" -o "$fat" --targets "$target"
# The baseline: copying the fat file, plus decompressing its device code
# (the .hip_fatbin section, compressed as the archives compress, level 3).
objcopy -O binary --only-section=.hip_fatbin "$fat" "$work/fatbin.bin"
zstd -q -3 -f "$work/fatbin.bin" -o "$work/fatbin.zst"
echo "fat library: $(mib "$(size_of "$fat")"), of it device code: $(mib "$(size_of "$work/fatbin.bin")")"
hyperfine --style basic --warmup 1 --runs 7 --export-json "$work/materialize.json" \
    -n materialize "$pack materialize $host -o $work/again.so --targets $target" \
    -n cp+zstd "cp $fat $work/copy.so && zstd -q -d -f $work/fatbin.zst -o $work/fatbin.out"
python3 - "$work/materialize.json" <<'PY'
import json, sys
results = {r["command"]: r["median"] for r in json.load(open(sys.argv[1]))["results"]}
print(f"median: materialize {results['materialize']:.3f} s, cp + zstd -d {results['cp+zstd']:.3f} s: "
      f"{results['materialize'] / results['cp+zstd']:.2f}x (goal: at most 1.5x)")
PY
/usr/bin/time -f "materialize: peak RSS %M KiB (goal: under 131072)" \
    "$pack" materialize "$host" -o "$work/again.so" --targets "$target" >/dev/null
cmp "$fat" "$work/again.so" && echo "deterministic: the same bytes twice"

echo
echo "== installed size for $target in each layout"
KPACK_GET_CACHE_DIR="$work/cache" KPACK_GET_STATE_DIR="$work/state" \
    "$get" --repo "rocm=file://$work/repo" --key "$work/key.pub" \
    --prefix "$work/prefix-fat" --target "$target" --layout fat --no-progress \
    install rocm-blas | tail -1
for layout in kpack fat; do
    dir="$work/prefix"
    [ "$layout" = fat ] && dir="$work/prefix-fat"
    echo "$layout: $(mib "$(du -sb --exclude=.lock "$dir" | cut -f1)")"
done
