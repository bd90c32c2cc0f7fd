#!/usr/bin/env bash
# Planning benchmark of kpack-get: resolution and the root's size, served
# over loopback by python3 -m http.server.
#
#   E  install --dry-run of the head of a chain of 800 packages (each
#      depends on the next): goal < 1 s, root and shards already fetched
#   F  install --dry-run of a package depending on 2,000 others
#   G  a root of 100,000 packages: kpack-get list, search and install
#      --dry-run of one package (time and peak RSS)
#
# Cold runs empty the cache and state first (root and every shard over
# HTTP); warm runs find them cached, as after `kpack-get update`.
#
# Usage: crates/rocm-kpack-get/benches/plan.sh
# Environment:
#   BENCH_DIR   work directory (default target/bench-plan; inputs are kept
#               there between runs; `rm -rf` it to regenerate)
#   RUNS        hyperfine runs (default 10)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
WORK=${BENCH_DIR:-$ROOT/target/bench-plan}
RUNS=${RUNS:-10}

say() { printf '\n== %s\n' "$*" >&2; }
die() {
    printf 'plan.sh: %s\n' "$*" >&2
    exit 1
}
for tool in hyperfine jq python3 curl; do
    command -v "$tool" >/dev/null || die "$tool is needed (apt-get install $tool)"
done
[[ -x /usr/bin/time ]] || die "/usr/bin/time is needed (apt-get install time)"

say "building (release)"
(cd "$ROOT" && cargo build --release -p rocm-kpack-get -p kpack-repo)
KPACK_GET=$ROOT/target/release/kpack-get
KPACK_REPO=$ROOT/target/release/kpack-repo
gen() { (cd "$ROOT" && cargo bench -q -p rocm-kpack-get --bench gen_repo -- "$@"); }

SRV=$WORK/srv
KEY=$WORK/key
if [[ ! -e $WORK/inputs.done ]]; then
    say "generating inputs in $WORK"
    rm -rf "$WORK"
    mkdir -p "$SRV"
    "$KPACK_REPO" keygen "$KEY" --unencrypted
    gen chain "$SRV/chain" "$KEY.key" 800
    gen fanout "$SRV/fanout" "$KEY.key" 2001
    gen index "$SRV/large" "$KEY.key" 100000 1
    touch "$WORK/inputs.done"
fi

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORT=18580
while ! port_free "$PORT"; do PORT=$((PORT + 1)); done
python3 -m http.server --bind 127.0.0.1 --directory "$SRV" "$PORT" >/dev/null 2>&1 &
SERVER_PID=$!
trap 'kill $SERVER_PID 2>/dev/null || true' EXIT
BASE=http://127.0.0.1:$PORT
for _ in $(seq 100); do
    curl -sf -o /dev/null "$BASE/chain/index.toml" && break
    sleep 0.1
done
curl -sf -o /dev/null "$BASE/chain/index.toml" || die "the server does not answer on $BASE"

RUN=$WORK/run
RESULTS=$WORK/results
rm -rf "$RUN" "$RESULTS"
mkdir -p "$RUN" "$RESULTS"
kg() { # REPO ARGS...: the kpack-get command line, quoted
    local repo=$1
    shift
    printf '%q ' "$KPACK_GET" --repo "bench=$BASE/$repo" --key "$KEY.pub" \
        --prefix "$RUN/$repo/prefix" --cache-dir "$RUN/$repo/cache" \
        --state-dir "$RUN/$repo/state" --no-progress --no-hsa --target gfx1100 "$@"
}
cold() { printf 'rm -rf %q %q' "$RUN/$1/cache" "$RUN/$1/state"; }
median() { jq -r ".results[$2].median" "$RESULTS/$1.json"; }
hf() { # NAME HYPERFINE-ARGS...
    local name=$1
    shift
    hyperfine --style basic --runs "$RUNS" --export-json "$RESULTS/$name.json" "$@" >&2
}
rss() { # NAME COMMAND: peak RSS in KiB of one warm run
    /usr/bin/time -v -o "$RESULTS/$1.time" bash -c "exec $2" >/dev/null
    awk -F': ' '/Maximum resident set size/ {print $2}' "$RESULTS/$1.time"
}

E=$(kg chain install --dry-run rocm-pkg-00000)
F=$(kg fanout install --dry-run rocm-pkg-00000)
G_LIST=$(kg large list)
G_SEARCH=$(kg large search rocm-pkg-9999)
G_DRY=$(kg large install --dry-run rocm-pkg-99999)
for command in "$E" "$F" "$G_SEARCH" "$G_DRY"; do
    eval "$command" >/dev/null || die "failed: $command"
done
eval "$G_LIST" >/dev/null || die "failed: $G_LIST"

say "E: a chain of 800 packages"
hf e --warmup 1 -n "warm" --prepare true "$E" -n "cold" --prepare "$(cold chain)" "$E"
say "F: 2,000 dependencies of one package"
hf f --warmup 1 -n "warm" --prepare true "$F" -n "cold" --prepare "$(cold fanout)" "$F"
say "G: a root of 100,000 packages"
hf g --warmup 1 -n "list" "$G_LIST" -n "search" "$G_SEARCH" -n "install --dry-run" "$G_DRY"
RSS_E=$(rss e "$E")
RSS_F=$(rss f "$F")
RSS_LIST=$(rss g-list "$G_LIST")
RSS_SEARCH=$(rss g-search "$G_SEARCH")
RSS_DRY=$(rss g-dry "$G_DRY")
ROOT_SIZE=$(stat -c %s "$SRV/large/index.toml")

ms() { awk -v s="$1" 'BEGIN { printf "%8.0f ms", s * 1000 }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }
{
    echo
    echo "kpack-get planning benchmark: $(nproc) cores, loopback, python3 -m http.server"
    echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); medians of $RUNS runs"
    echo
    printf '%-58s %s\n' "E  chain of 800, dry run, warm (goal < 1 s)" "$(ms "$(median e 0)")  peak RSS $(mib "$RSS_E")"
    printf '%-58s %s\n' "   same, cold (root + 800 shards over HTTP)" "$(ms "$(median e 1)")"
    printf '%-58s %s\n' "F  fan-out of 2,000, dry run, warm" "$(ms "$(median f 0)")  peak RSS $(mib "$RSS_F")"
    printf '%-58s %s\n' "   same, cold (root + 2,001 shards over HTTP)" "$(ms "$(median f 1)")"
    printf '%-58s %s\n' "G  100,000-package root ($(mib $((ROOT_SIZE / 1024)))): list" "$(ms "$(median g 0)")  peak RSS $(mib "$RSS_LIST")"
    printf '%-58s %s\n' "   search" "$(ms "$(median g 1)")  peak RSS $(mib "$RSS_SEARCH")"
    printf '%-58s %s\n' "   install --dry-run of one package" "$(ms "$(median g 2)")  peak RSS $(mib "$RSS_DRY")"
    echo
    echo "hyperfine JSON and time -v output: $RESULTS"
} | tee "$RESULTS/summary.txt"
