#!/usr/bin/env bash
# The main job on a built-in input: Debian's rocRAND package (a fat ROCm
# library, ../shared/fixtures/debian) is split by kpack-pack into a
# host-only tree plus per-GPU archives, every wrapper is checked, and the
# code object one GPU needs is loaded through the runtime's loader, as a HIP
# runtime would. The first argument picks the GPU target (default
# gfx90a:sramecc+:xnack-, an MI210/MI250).
set -euo pipefail
cd "$(dirname "$0")"

target=${1:-gfx90a:sramecc+:xnack-}
fixture=${KPACK_FIXTURES:-../shared/fixtures}/debian/librocrand1_5.3.3-4_amd64.deb
work=demo-out

cargo build --quiet --release -p kpack-packer
rm -rf "$work"
mkdir -p "$work"
dpkg-deb -x "$fixture" "$work/package"

echo "== kpack-pack split: fat package -> host-only tree + .kpack/ archives"
target/release/kpack-pack split "$work/package/usr" -o "$work/split" --group rocrand
echo
echo "== kpack-pack verify: every wrapper resolves for every target"
target/release/kpack-pack verify "$work/split"
echo
echo "== the code object a $target GPU loads"
out=$(target/release/kpack-pack verify "$work/split" --target "$target")
echo "$out"

library=lib/x86_64-linux-gnu/librocrand.so.1.1
fat=$(stat -c %s "$work/package/usr/$library")
host=$(stat -c %s "$work/split/$library")
archive=$(echo "$out" | sed -n 's/^ok .* from \(.*\) ([0-9]* bytes)$/\1/p' | head -n 1)
needed=$host
if [ -n "$archive" ]; then
    needed=$((host + $(stat -c %s "$work/split/$archive")))
fi
echo
echo "a $target machine needs $needed bytes (host library + $archive) of the $fat-byte fat library: $(( (fat - needed) * 100 / fat ))% saved"
