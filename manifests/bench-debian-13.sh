#!/usr/bin/env bash
# Debian 13's whole ROCm library stack, published and installed (not run by
# CI: over 1.1 GB of .debs; README.md says how to fetch them). It builds
# manifests/debian-13/ with `kpack-repo build` (wall time, peak RSS), builds
# it again (nothing to publish), serves the repository and the .debs over
# loopback, and for gfx1100 and gfx90a installs every package with
# kpack-get, printing the bytes downloaded and installed against the sum of
# the .debs and of their installed sizes. Then it times a whole-stack
# install for gfx1100 against fetching the same .debs from the same server
# with curl and unpacking each with `dpkg-deb -x`.
#
#   manifests/bench-debian-13.sh DIR_WITH_THE_DEBS
set -euo pipefail
cd "$(dirname "$0")/.."

sources=$(cd "${1:?usage: $0 DIR_WITH_THE_DEBS}" && pwd)
work=${BENCH_WORK:-bench-out/debian-13}
for tool in hyperfine curl dpkg-deb python3 /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "$tool not found (apt-get install hyperfine curl dpkg time)" >&2; exit 1; }
done

cargo build --quiet --release -p kpack-repo -p rocm-kpack-get
repo_tool=$PWD/target/release/kpack-repo
get=$PWD/target/release/kpack-get
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)

mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
percent() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f%%", 100 * a / b }'; }

# The .debs the manifests name: one per Debian package of the name table.
debs=()
deb_bytes=0
installed_kib=0
for package in $(sed -n 's/^\(lib[a-z0-9.+-]*\) = .*/\1/p' manifests/debian-13/names.toml); do
    deb=$(ls "$sources/${package}"_*_amd64.deb 2>/dev/null | sort -V | tail -1)
    [ -n "$deb" ] || { echo "no ${package}_*_amd64.deb in $sources (see manifests/README.md)" >&2; exit 1; }
    debs+=("$deb")
    deb_bytes=$((deb_bytes + $(stat -c %s "$deb")))
    installed_kib=$((installed_kib + $(dpkg-deb -f "$deb" Installed-Size)))
done
installed_bytes=$((installed_kib * 1024))
packages=$(cd manifests/debian-13 && ls *.toml | grep -v '^names.toml$' | sed 's/\.toml$//')
echo "== the stack: ${#debs[@]} .debs, $(mib "$deb_bytes"); installed: $(mib "$installed_bytes")"

echo
echo "== kpack-repo build of manifests/debian-13 ($(nproc) cores)"
"$repo_tool" keygen "$work/key" --unencrypted >/dev/null
/usr/bin/time -f "build: %e s wall, peak RSS %M KiB (goals: under 600 s, under 1048576 KiB)" \
    "$repo_tool" build "$work/repo" manifests/debian-13 --sources "$sources" \
    --secret-key "$work/key.key" --no-progress
echo "-- again, nothing changed:"
/usr/bin/time -f "second build: %e s" \
    "$repo_tool" build "$work/repo" manifests/debian-13 --sources "$sources" \
    --secret-key "$work/key.key" --no-progress
"$repo_tool" verify "$work/repo" --key "$work/key.pub"
echo "repository: $(mib "$(du -sb "$work/repo" | cut -f1)")"

# One loopback server for the repository and the .debs.
mkdir -p "$work/www"
ln -s "$work/repo" "$work/www/repo"
ln -s "$sources" "$work/www/debs"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work/www" >/dev/null 2>&1 &
server=$!
trap 'kill $server' EXIT
sleep 1
url=http://127.0.0.1:$port

kpack_get() { # TARGET LAYOUT DIR ARGS...
    local target=$1 layout=$2 dir=$3
    shift 3
    KPACK_GET_CACHE_DIR="$dir/cache" KPACK_GET_STATE_DIR="$dir/state" \
        "$get" --repo "rocm=$url/repo/" --key "$work/key.pub" --prefix "$dir/prefix" \
        --target "$target" --layout "$layout" --no-progress "$@"
}
install() { # TARGET LAYOUT DIR
    kpack_get "$1" "$2" "$3" install $packages
}
# The bytes an install downloads: the artifacts it chooses as served (a
# transport-encoded one is cached decoded, so the cache would overstate it).
download_size() { # TARGET LAYOUT DIR
    kpack_get "$1" "$2" "$3" --json install --dry-run $packages |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["size"])'
}

for target in gfx1100 gfx90a; do
    for layout in kpack fat; do
        dir="$work/$target-$layout"
        rm -rf "$dir"
        downloaded=$(download_size "$target" "$layout" "$dir")
        install "$target" "$layout" "$dir" > "$dir.log"
        installed=$(du -sb --exclude=.lock "$dir/prefix" | cut -f1)
        echo "== $target, $layout layout: downloaded $(mib "$downloaded") ($(percent "$downloaded" "$deb_bytes") of the .debs; goal: at most 15%);" \
            "installed $(mib "$installed") ($(percent "$installed" "$installed_bytes") of their installed size)"
    done
done

echo
echo "== install of the whole stack for gfx1100 against curl + dpkg-deb -x of the .debs"
cat > "$work/apt-floor.sh" <<EOF
#!/bin/sh
set -e
rm -rf "$work/floor" && mkdir -p "$work/floor/debs" "$work/floor/root"
cd "$work/floor/debs"
for deb in $(for d in "${debs[@]}"; do printf '%s ' "$(basename "$d")"; done); do
    curl -sf -O "$url/debs/\$deb"
    dpkg-deb -x "\$deb" "$work/floor/root"
done
EOF
chmod +x "$work/apt-floor.sh"
hyperfine --style basic --warmup 1 --runs 3 --export-json "$work/install.json" \
    --prepare "rm -rf $work/timed" \
    -n "kpack-get (auto layout)" "KPACK_GET_CACHE_DIR=$work/timed/cache KPACK_GET_STATE_DIR=$work/timed/state $get --repo rocm=$url/repo/ --key $work/key.pub --prefix $work/timed/prefix --target gfx1100 --no-progress install $(echo $packages)" \
    -n "kpack-get (kpack layout)" "KPACK_GET_CACHE_DIR=$work/timed/cache KPACK_GET_STATE_DIR=$work/timed/state $get --repo rocm=$url/repo/ --key $work/key.pub --prefix $work/timed/prefix --target gfx1100 --layout kpack --no-progress install $(echo $packages)" \
    -n "curl + dpkg-deb -x" "$work/apt-floor.sh"
python3 - "$work/install.json" <<'PY'
import json, sys
results = {r["command"]: r["median"] for r in json.load(open(sys.argv[1]))["results"]}
floor = results["curl + dpkg-deb -x"]
for name, median in results.items():
    print(f"median: {name} {median:.2f} s ({median / floor:.2f}x of curl + dpkg-deb -x; goal: at most 0.3x)")
PY
