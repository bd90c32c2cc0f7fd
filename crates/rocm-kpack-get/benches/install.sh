#!/usr/bin/env bash
# Install benchmark of kpack-get against curl, over loopback, from one local
# static HTTP server (nginx with sendfile; python3 -m http.server if nginx
# cannot be installed).
#
#   A  one 512 MiB device archive (plus a tiny host tree): kpack-get install
#      versus `curl -s -o FILE URL` of the same archive; goal <= 1.1x curl
#   B  eight 64 MiB device archives plus the host tree: kpack-get install
#      --target <8 targets> versus the same 9 files fetched by 9 sequential
#      curl runs; goal: kpack-get faster
#   C  peak RSS of kpack-get in A and B (/usr/bin/time -v); goal < 64 MiB
#   D  kpack-get install --dry-run of a package deep in a 10,000-package x
#      20-version repository, root and shards already fetched; goal: median
#      < 150 ms
#
# Usage: crates/rocm-kpack-get/benches/install.sh
# Environment:
#   BENCH_DIR   work directory (default target/bench-install; inputs are
#               kept there between runs, ~1.2 GiB; `rm -rf` it to regenerate)
#   RUNS        hyperfine runs for A and B (default 5)
#   RUNS_D      hyperfine runs for D (default 30)
#   PORT        server port (default: the first free one from 18480)
#
# Medians come from hyperfine; A and B empty kpack-get's cache and prefix
# (and curl's output) and `sync` before every run, so each run downloads
# everything and starts with no dirty pages. The machine's other load shows
# in the figures: run it on a quiet machine for release numbers.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
WORK=${BENCH_DIR:-$ROOT/target/bench-install}
RUNS=${RUNS:-5}
RUNS_D=${RUNS_D:-30}
MIB=$((1024 * 1024))
LARGE_TARGET=gfx1100
EIGHT_TARGETS=(gfx900 gfx906 gfx908 gfx90a gfx942 gfx1030 gfx1100 gfx1101)
INDEX_PACKAGE=rocm-pkg-09999 # depends on 01249 -> 00156 -> 00019 -> 00002 -> 00000

say() { printf '\n== %s\n' "$*" >&2; }
die() {
    printf 'install.sh: %s\n' "$*" >&2
    exit 1
}

# --- tools -----------------------------------------------------------------
need=()
command -v hyperfine >/dev/null || need+=(hyperfine)
command -v curl >/dev/null || need+=(curl)
command -v jq >/dev/null || need+=(jq)
command -v strace >/dev/null || need+=(strace)
[[ -x /usr/bin/time ]] || need+=(time)
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || need+=(nginx-light)
if ((${#need[@]})); then
    say "installing ${need[*]}"
    SUDO=()
    [[ $EUID -eq 0 ]] || SUDO=(sudo)
    "${SUDO[@]}" apt-get update -qq
    # nginx-light only if it installs; python3 -m http.server is the fallback.
    for package in "${need[@]}"; do
        DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq "$package" >/dev/null ||
            [[ $package == nginx-light || $package == strace ]] || die "cannot install $package"
    done
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[[ -x $NGINX ]] || NGINX=

# --- build -----------------------------------------------------------------
say "building (release)"
(cd "$ROOT" && cargo build --release -p rocm-kpack-get -p kpack-repo)
KPACK_GET=$ROOT/target/release/kpack-get
KPACK_REPO=$ROOT/target/release/kpack-repo
gen() { (cd "$ROOT" && cargo bench -q -p rocm-kpack-get --bench gen_repo -- "$@"); }

# --- inputs ----------------------------------------------------------------
SRV=$WORK/srv
REPO=$SRV/repo
INDEX=$SRV/index-repo
KEY=$WORK/key
mkdir -p "$WORK"
if [[ ! -e $WORK/inputs.done ]]; then
    say "generating inputs in $WORK"
    rm -rf "$SRV" "$WORK/inputs" "$KEY.key" "$KEY.pub"
    mkdir -p "$SRV" "$WORK/inputs"
    "$KPACK_REPO" keygen "$KEY" --unencrypted
    # The host tree: a small directory, packed by `kpack-repo add`.
    host=$WORK/inputs/host
    mkdir -p "$host/lib" "$host/include" "$host/share/doc/bench"
    head -c $((256 * 1024)) /dev/urandom >"$host/lib/libbench.so.1.0"
    ln -s libbench.so.1.0 "$host/lib/libbench.so"
    echo 'int bench(void);' >"$host/include/bench.h"
    echo 'benchmark package' >"$host/share/doc/bench/README"
    large=$WORK/inputs/large
    mkdir -p "$large"
    gen archive "$large/rocm_$LARGE_TARGET.kpack" "$LARGE_TARGET" $((512 * MIB)) 1
    "$KPACK_REPO" add "$REPO" bench-large 1.0.0 "$host" "$large/rocm_$LARGE_TARGET.kpack" \
        --summary "one 512 MiB archive" --key "$KEY.key"
    eight=$WORK/inputs/eight
    mkdir -p "$eight"
    seed=10
    for target in "${EIGHT_TARGETS[@]}"; do
        gen archive "$eight/rocm_$target.kpack" "$target" $((64 * MIB)) $seed
        seed=$((seed + 1))
    done
    "$KPACK_REPO" add "$REPO" bench-eight 1.0.0 "$host" "$eight"/*.kpack \
        --summary "eight 64 MiB archives" --key "$KEY.key"
    # The pool has copies; the inputs are not needed any more.
    rm -rf "$large" "$eight"
    gen index "$INDEX" "$KEY.key" 10000 20
    touch "$WORK/inputs.done"
fi
LARGE_PATH=pool/bench-large/1.0.0/rocm_$LARGE_TARGET.kpack
EIGHT_PATHS=(pool/bench-eight/1.0.0/host.tar.zst)
for target in "${EIGHT_TARGETS[@]}"; do
    EIGHT_PATHS+=("pool/bench-eight/1.0.0/rocm_$target.kpack")
done
for path in "$LARGE_PATH" "${EIGHT_PATHS[@]}"; do
    [[ -f $REPO/$path ]] || die "$REPO/$path is missing; rm -rf $WORK and run again"
done

# --- server ----------------------------------------------------------------
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
if [[ -z ${PORT:-} ]]; then
    PORT=18480
    while ! port_free "$PORT"; do PORT=$((PORT + 1)); done
fi
SERVER_PID=
stop_server() {
    if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
}
trap stop_server EXIT
trap 'exit 130' INT TERM
SERVER=
if [[ -n $NGINX ]]; then
    conf=$WORK/nginx
    mkdir -p "$conf/tmp"
    user_line=
    [[ $EUID -ne 0 ]] || user_line='user root root;'
    cat >"$conf/nginx.conf" <<EOF
$user_line
daemon off;
master_process off;
worker_processes 1;
pid $conf/nginx.pid;
error_log $conf/error.log warn;
events { worker_connections 256; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    default_type application/octet-stream;
    client_body_temp_path $conf/tmp/body;
    proxy_temp_path $conf/tmp/proxy;
    fastcgi_temp_path $conf/tmp/fastcgi;
    uwsgi_temp_path $conf/tmp/uwsgi;
    scgi_temp_path $conf/tmp/scgi;
    server {
        listen 127.0.0.1:$PORT;
        root $SRV;
    }
}
EOF
    "$NGINX" -p "$conf" -c "$conf/nginx.conf" -e "$conf/error.log" &
    SERVER_PID=$!
    SERVER="nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///') (sendfile, 1 worker)"
else
    python3 -m http.server --bind 127.0.0.1 --directory "$SRV" "$PORT" >/dev/null 2>&1 &
    SERVER_PID=$!
    SERVER="python3 -m http.server (nginx could not be installed)"
fi
BASE=http://127.0.0.1:$PORT
for _ in $(seq 100); do
    curl -sf -o /dev/null "$BASE/repo/index.toml" && break
    kill -0 "$SERVER_PID" 2>/dev/null || die "the server did not start (see $WORK/nginx/error.log)"
    sleep 0.1
done
curl -sf -o /dev/null "$BASE/repo/index.toml" || die "the server does not answer on $BASE"
say "serving $SRV at $BASE with $SERVER"
# The server reads from the page cache in every run, for both clients.
cat "$REPO/$LARGE_PATH" "${EIGHT_PATHS[@]/#/$REPO/}" >/dev/null

# --- the runs --------------------------------------------------------------
RUN=$WORK/run
RESULTS=$WORK/results
rm -rf "$RUN" "$RESULTS"
mkdir -p "$RUN/curl" "$RESULTS"
kg() {
    local name=$1
    shift
    printf '%q ' "$KPACK_GET" --repo "bench=$BASE/repo" --key "$KEY.pub" \
        --prefix "$RUN/$name/prefix" --cache-dir "$RUN/$name/cache" \
        --state-dir "$RUN/$name/state" --no-progress --no-hsa -q "$@"
}
empty() { printf 'rm -rf %q %q && sync' "$RUN/$1/prefix" "$RUN/$1/cache"; }
KG_A=$(kg a --target "$LARGE_TARGET" install bench-large)
KG_B=$(kg b --target "$(
    IFS=,
    echo "${EIGHT_TARGETS[*]}"
)" install bench-eight)
CURL_A="curl -sf -o $RUN/curl/large.kpack $BASE/repo/$LARGE_PATH"
CURL_B=""
i=0
for path in "${EIGHT_PATHS[@]}"; do
    CURL_B+="curl -sf -o $RUN/curl/$i $BASE/repo/$path && "
    i=$((i + 1))
done
CURL_B+=true
CURL_EMPTY="rm -rf $RUN/curl && mkdir -p $RUN/curl && sync"

# One first install each: the roots go into the state directories (kept, as
# on a machine that ran `kpack-get update`), and a failure shows here.
eval "$KG_A" || die "kpack-get install bench-large failed"
eval "$KG_B" || die "kpack-get install bench-eight failed"
[[ -f $RUN/a/prefix/.kpack/rocm_$LARGE_TARGET.kpack ]] || die "A did not install its archive"
[[ $(find "$RUN/b/prefix/.kpack" -type f -name '*.kpack' | wc -l) -eq 8 ]] || die "B did not install 8 archives"

hf() { # NAME HYPERFINE-ARGS...
    local name=$1
    shift
    hyperfine --style basic --export-json "$RESULTS/$name.json" "$@" >&2
}
median() { jq -r ".results[$2].median" "$RESULTS/$1.json"; }
field() { jq -r ".results[$2].$3" "$RESULTS/$1.json"; }

say "A: one 512 MiB archive"
hf a --runs "$RUNS" --warmup 1 \
    -n "kpack-get install" --prepare "$(empty a)" "$KG_A" \
    -n "curl -o" --prepare "$CURL_EMPTY" "$CURL_A" \
    -n "kpack-get install, archive cached (prefix step alone)" \
    --prepare "rm -rf $RUN/a/prefix && sync" "$KG_A" \
    -n "curl -o, then sync FILE (durable)" --prepare "$CURL_EMPTY" "$CURL_A && sync $RUN/curl/large.kpack"

say "B: eight 64 MiB archives and the host tree"
hf b --runs "$RUNS" --warmup 1 \
    -n "kpack-get install --target (8)" --prepare "$(empty b)" "$KG_B" \
    -n "9 x curl -o, sequential" --prepare "$CURL_EMPTY" "$CURL_B"

say "C: peak RSS (/usr/bin/time -v)"
rss() { # NAME PREPARE COMMAND -> "KiB seconds"
    eval "$2"
    /usr/bin/time -v -o "$RESULTS/$1.time" bash -c "exec $3" >/dev/null
    local kib wall
    kib=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$RESULTS/$1.time")
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$RESULTS/$1.time")
    echo "$kib $wall"
}
read -r RSS_A WALL_A < <(rss rss-a "$(empty a)" "$KG_A")
read -r RSS_B WALL_B < <(rss rss-b "$(empty b)" "$KG_B")
read -r RSS_CURL_A _ < <(rss rss-curl-a "$CURL_EMPTY" "$CURL_A")

say "where the time goes (one run each under strace --seccomp-bpf)"
# Prints "wall fsync copy syncfs" in seconds: the durations of kpack-get's
# fsync (cache blobs, summed over threads), copy_file_range (cache to
# staging) and syncfs (before and after the commit) calls, and the wall time.
phases() { # NAME PREPARE COMMAND
    if ! command -v strace >/dev/null; then
        echo "0 0 0 0"
        return
    fi
    eval "$2"
    local start end
    start=$(date +%s.%N)
    strace -f -qq -T --seccomp-bpf -e trace=fsync,fdatasync,syncfs,copy_file_range \
        -o "$RESULTS/$1.strace" bash -c "exec $3" >/dev/null
    end=$(date +%s.%N)
    awk -v wall="$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" '
        /<[0-9.]+>$/ {
            if (match($0, /<\.\.\. [a-z_]+ resumed>/)) {
                name = substr($0, RSTART + 5, RLENGTH - 14)
            } else {
                match($0, /[a-z_]+\(/)
                name = substr($0, RSTART, RLENGTH - 1)
            }
            d = $NF
            gsub(/[<>]/, "", d)
            if (name == "fsync" || name == "fdatasync") fsync += d
            else if (name == "copy_file_range") copy += d
            else if (name == "syncfs") syncfs += d
        }
        END { printf "%s %s %s %s\n", wall, fsync + 0, copy + 0, syncfs + 0 }
    ' "$RESULTS/$1.strace"
}
read -r PH_A_WALL PH_A_FSYNC PH_A_COPY PH_A_SYNCFS < <(phases phases-a "$(empty a)" "$KG_A")
read -r PH_B_WALL PH_B_FSYNC PH_B_COPY PH_B_SYNCFS < <(phases phases-b "$(empty b)" "$KG_B")

say "D: install --dry-run in a 10,000-package repository"
KG_D=$(printf '%q ' "$KPACK_GET" --repo "bench-index=$BASE/index-repo" --key "$KEY.pub" \
    --prefix "$RUN/d/prefix" --cache-dir "$RUN/d/cache" --state-dir "$RUN/d/state" \
    --no-progress --no-hsa --target gfx1100 install --dry-run "$INDEX_PACKAGE")
eval "$KG_D" >"$RESULTS/d-plan.txt" || die "the dry run failed"
hf d --warmup 3 --runs "$RUNS_D" \
    -n "dry run, warm (root and shards fetched)" --prepare true "$KG_D" \
    -n "dry run, cold (root and shards over HTTP)" \
    --prepare "rm -rf $RUN/d/state $RUN/d/cache" "$KG_D"
read -r RSS_D _ < <(rss rss-d true "$KG_D")
ROOT_SIZE=$(stat -c %s "$INDEX/index.toml")

# --- summary ---------------------------------------------------------------
ms() { awk -v s="$1" 'BEGIN { printf "%8.0f ms", s * 1000 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }
verdict() { awk -v c="$1" 'BEGIN { print (c ? "met" : "MISSED") }'; }
A_KG=$(median a 0)
A_CURL=$(median a 1)
A_PREFIX=$(median a 2)
A_CURL_SYNC=$(median a 3)
B_KG=$(median b 0)
B_CURL=$(median b 1)
D_WARM=$(median d 0)
D_COLD=$(median d 1)
phase_lines() { # WALL FSYNC COPY SYNCFS [overlapped]
    awk -v w="$1" 'BEGIN { exit !(w > 0) }' || return 0
    printf '%-58s %s\n' "   one traced run: wall" "$(ms "$1")"
    if [[ ${5:-} == overlapped ]]; then
        printf '%-58s %s\n' "     fsync of the 9 files in the cache (summed over threads)" "$(ms "$2")"
    else
        printf '%-58s %s\n' "     fsync of the downloaded file in the cache" "$(ms "$2")"
    fi
    printf '%-58s %s\n' "     copy cache -> staging (copy_file_range; 0 if linked)" "$(ms "$3")"
    printf '%-58s %s\n' "     syncfs (only above 512 files; else per-file fsync)" "$(ms "$4")"
    if [[ ${5:-} == overlapped ]]; then
        printf '%-58s %s\n' "     download, sha256 and fsync (concurrent)" \
            "$(ms "$(awk -v w="$1" -v b="$3" -v c="$4" 'BEGIN { print w - b - c }')")"
    else
        printf '%-58s %s\n' "     the rest: download, sha256, verify, extract, rename" \
            "$(ms "$(awk -v w="$1" -v a="$2" -v b="$3" -v c="$4" 'BEGIN { print w - a - b - c }')")"
    fi
}
cpu() { awk -v u="$(field "$1" "$2" user)" -v s="$(field "$1" "$2" system)" \
    'BEGIN { printf "%.2f s user + %.2f s sys", u, s }'; }
{
    echo
    echo "kpack-get install benchmark: $(nproc) cores, loopback, $SERVER"
    echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); medians of $RUNS runs (D: $RUNS_D)"
    echo
    printf '%-58s %s\n' "A  kpack-get install (512 MiB archive + host tree)" "$(ms "$A_KG")  [$(cpu a 0)]"
    printf '%-58s %s\n' "   curl -s -o FILE URL (same archive)" "$(ms "$A_CURL")  [$(cpu a 1)]"
    printf '%-58s %s\n' "   ratio kpack-get / curl (goal <= 1.10x)" "$(ratio "$A_KG" "$A_CURL")  $(verdict "$(awk -v a="$A_KG" -v b="$A_CURL" 'BEGIN{print a <= 1.1 * b}')")"
    printf '%-58s %s\n' "   install from a warm cache (re-hashes the cached archive)" "$(ms "$A_PREFIX")"
    printf '%-58s %s\n' "   curl -o, then sync FILE (same durability as the cache)" "$(ms "$A_CURL_SYNC")"
    phase_lines "$PH_A_WALL" "$PH_A_FSYNC" "$PH_A_COPY" "$PH_A_SYNCFS"
    printf '%-58s %s\n' "B  kpack-get install --target (8 x 64 MiB + host tree)" "$(ms "$B_KG")  [$(cpu b 0)]"
    printf '%-58s %s\n' "   9 sequential curl -o (same 9 files)" "$(ms "$B_CURL")  [$(cpu b 1)]"
    phase_lines "$PH_B_WALL" "$PH_B_FSYNC" "$PH_B_COPY" "$PH_B_SYNCFS" overlapped
    printf '%-58s %s\n' "   ratio kpack-get / curl (goal < 1.00x)" "$(ratio "$B_KG" "$B_CURL")  $(verdict "$(awk -v a="$B_KG" -v b="$B_CURL" 'BEGIN{print a < b}')")"
    printf '%-58s %s\n' "C  peak RSS, kpack-get A (goal < 64 MiB)" "$(mib "$RSS_A")  $(verdict "$((RSS_A < 65536))")  (wall $WALL_A)"
    printf '%-58s %s\n' "   peak RSS, kpack-get B (goal < 64 MiB)" "$(mib "$RSS_B")  $(verdict "$((RSS_B < 65536))")  (wall $WALL_B)"
    printf '%-58s %s\n' "   peak RSS, curl A" "$(mib "$RSS_CURL_A")"
    printf '%-58s %s\n' "D  install --dry-run $INDEX_PACKAGE, warm (goal < 150 ms)" "$(ms "$D_WARM")  $(verdict "$(awk -v a="$D_WARM" 'BEGIN{print a < 0.150}')")"
    printf '%-58s %s\n' "   same, cold (root $(mib $((ROOT_SIZE / 1024))) + 6 shards over HTTP)" "$(ms "$D_COLD")"
    printf '%-58s %s\n' "   peak RSS, warm dry run" "$(mib "$RSS_D")"
    echo
    echo "hyperfine JSON and time -v output: $RESULTS"
} | tee "$RESULTS/summary.txt"
# The prefixes and caches hold copies of every archive; the inputs stay.
rm -rf "$RUN"
