#!/usr/bin/env bash
# Installs librocm_kpack under a prefix: the shared library (with its
# soname link), the static library, the header and a pkg-config file.
#
#   crates/rocm-kpack/install.sh PREFIX [BUILD_DIR]
#
# BUILD_DIR is a cargo output directory holding librocm_kpack.so and .a
# (e.g. target/release); without it, a release build is made first.
set -euo pipefail

prefix=${1:?usage: crates/rocm-kpack/install.sh PREFIX [BUILD_DIR]}
here=$(cd "$(dirname "$0")" && pwd)
build_dir=${2:-}
if [ -z "$build_dir" ]; then
    cargo build --release -p rocm-kpack --manifest-path "$here/../../Cargo.toml"
    build_dir="$here/../../target/release"
fi
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$here/../../Cargo.toml" | head -n 1)
major=${version%%.*}

mkdir -p "$prefix/lib/pkgconfig" "$prefix/include/rocm_kpack"
install -m 0755 "$build_dir/librocm_kpack.so" "$prefix/lib/librocm_kpack.so.$version"
ln -sf "librocm_kpack.so.$version" "$prefix/lib/librocm_kpack.so.$major"
ln -sf "librocm_kpack.so.$major" "$prefix/lib/librocm_kpack.so"
install -m 0644 "$build_dir/librocm_kpack.a" "$prefix/lib/librocm_kpack.a"
install -m 0644 "$here/include/rocm_kpack/kpack.h" "$prefix/include/rocm_kpack/kpack.h"
prefix_abs=$(cd "$prefix" && pwd)
sed -e "s|@PREFIX@|$prefix_abs|" -e "s|@VERSION@|$version|" \
    "$here/rocm_kpack.pc.in" > "$prefix/lib/pkgconfig/rocm_kpack.pc"
echo "installed librocm_kpack $version under $prefix_abs"
