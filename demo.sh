#!/usr/bin/env bash
# The main job on a built-in input: Debian's rocRAND package (a fat ROCm
# library, ../shared/fixtures/debian) is split and published into a local
# signed repository with kpack-repo, then kpack-get installs rocm-rand into
# a local prefix for one GPU target, downloading only the host part and that
# GPU's archive. kpack-get looks for the HIP runtime the library would
# load and chooses the layout: with Debian's own runtime (libamdhip64-5,
# no kpack support) or none, the library is made fat again for that GPU,
# and the demo shows Debian's runtime registering it. It then installs the
# kpack layout too and checks the split library loads its code object
# through its marker. The first argument picks the GPU target (default
# gfx90a:sramecc+:xnack-, an MI210/MI250).
set -euo pipefail
cd "$(dirname "$0")"

target=${1:-gfx90a:sramecc+:xnack-}
fixtures=${KPACK_FIXTURES:-../shared/fixtures}
work=demo-out

# What the demo needs before it builds anything.
if ! command -v cargo >/dev/null 2>&1; then
    echo "demo.sh: cargo not found: install a Rust toolchain (https://rustup.rs) first" >&2
    exit 1
fi
missing=()
command -v cc >/dev/null 2>&1 || missing+=(gcc)             # zstd's C code
command -v dpkg-deb >/dev/null 2>&1 || missing+=(dpkg)      # unpacks the .deb
if [ ${#missing[@]} -gt 0 ]; then
    echo "demo.sh: needs Debian packages that are not installed; run" >&2
    echo "    sudo apt-get install -y ${missing[*]}" >&2
    exit 1
fi
if [ ! -f "$fixtures/debian/librocrand1_5.3.3-4_amd64.deb" ]; then
    echo "demo.sh: $fixtures/debian/librocrand1_5.3.3-4_amd64.deb not found:" >&2
    echo "    the demo reads the checkout's sibling ../shared/fixtures (or \$KPACK_FIXTURES)" >&2
    exit 1
fi

cargo build --quiet --release -p kpack-repo -p rocm-kpack-get -p kpack-packer
cargo build --quiet --release -p kpack-test-support --example hip_registrations
rm -rf "$work"
mkdir -p "$work"
repo_tool=target/release/kpack-repo
get=target/release/kpack-get

echo "== kpack-repo build: split Debian's rocRAND and publish it into a signed repository"
"$repo_tool" keygen "$work/repo-key" --unencrypted
"$repo_tool" build "$work/repo" manifests/rocm-rand.toml --sources "$fixtures/debian" --secret-key "$work/repo-key.key"
"$repo_tool" verify "$work/repo" --key "$work/repo-key.pub"

# kpack-get with its own cache and state, so the demo touches nothing else.
kpack_get() {
    KPACK_GET_CACHE_DIR="$PWD/$work/cache" KPACK_GET_STATE_DIR="$PWD/$work/state" \
        "$get" --repo "rocm=file://$PWD/$work/repo" --key "$work/repo-key.pub" \
        --prefix "$work/prefix" --target "$target" --no-progress "$@"
}

echo
echo "== kpack-get install --dry-run: what a $target machine needs, the HIP runtime found, the layout"
kpack_get install rocm-rand --dry-run
echo
echo "== kpack-get install"
kpack_get install rocm-rand
echo
echo "== kpack-get list and verify"
kpack_get list
kpack_get verify
echo
library="$work/prefix/lib/librocrand.so.1.1"
debian_runtime=/usr/lib/x86_64-linux-gnu/libamdhip64.so.5
show_registrations() {
    if [ -e "$debian_runtime" ]; then
        target/release/examples/hip_registrations "$library"
    else
        echo "(Debian's HIP runtime is not installed: sudo apt-get install libamdhip64-5 shows it here)"
    fi
}
echo "== Debian's own HIP runtime ($debian_runtime) registers the installed library"
show_registrations
echo
echo "== the kpack layout, asked for: split library and .kpack/ archive, for kpack-aware runtimes"
kpack_get --layout kpack install rocm-rand
target/release/kpack-pack verify "$work/prefix" --target "$target"
echo "what Debian's runtime, which does not know kpack, answers the split library:"
show_registrations
