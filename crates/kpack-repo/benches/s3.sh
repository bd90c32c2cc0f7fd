#!/usr/bin/env bash
# Publishing benchmark of kpack-repo against an S3-compatible server on
# loopback (moto's server mode, from the tests' virtual environment).
#
#   A  kpack-repo add of one 1 GiB artifact to a bucket (a multipart upload
#      streamed from disk) versus `curl -T` PUTting the same file to the same
#      server; wall time (hyperfine median) and kpack-repo's peak RSS
#      (/usr/bin/time -v); goal: RSS < 128 MiB
#   B  publish latency of a one-package update in a bucket holding a
#      10,000-package repository, and the requests it makes (from the
#      server's log); goal: a handful of requests, < 1 s
#
# Usage: crates/kpack-repo/benches/s3.sh
# Environment:
#   BENCH_DIR   work directory (default target/bench-s3; the 1 GiB input and
#               the 10,000-package repository are kept there between runs)
#   RUNS        hyperfine runs of A (default 5)
#   RUNS_B      hyperfine runs of B (default 10, after one warm-up run)
#   PACKAGES    packages in B's repository (default 10000)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
WORK=${BENCH_DIR:-$ROOT/target/bench-s3}
RUNS=${RUNS:-5}
PACKAGES=${PACKAGES:-10000}
VENV=${KPACK_TEST_VENV:-$ROOT/target/test-venv}

say() { printf '\n== %s\n' "$*" >&2; }
die() {
    printf 's3.sh: %s\n' "$*" >&2
    exit 1
}

need=()
command -v hyperfine >/dev/null || need+=(hyperfine)
command -v curl >/dev/null || need+=(curl)
[[ -x /usr/bin/time ]] || need+=(time)
if ((${#need[@]})); then
    say "installing ${need[*]}"
    SUDO=()
    [[ $EUID -eq 0 ]] || SUDO=(sudo)
    "${SUDO[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq "${need[@]}" >/dev/null
fi
[[ -x $VENV/bin/moto_server ]] || die "no moto_server in $VENV: run ./test.sh once (it makes the venv)"

say "building (release)"
(cd "$ROOT" && cargo build -q --release -p kpack-repo --bin kpack-repo)
REPO=$ROOT/target/release/kpack-repo
mkdir -p "$WORK"

# --- server ----------------------------------------------------------------
LOG=$WORK/moto.log
"$VENV/bin/moto_server" -H 127.0.0.1 -p 0 >"$LOG" 2>&1 &
MOTO=$!
trap 'kill $MOTO 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    grep -q 'Running on http://' "$LOG" && break
    sleep 0.1
done
ENDPOINT=$(grep -o 'http://127.0.0.1:[0-9]*' "$LOG" | head -1)
[[ -n $ENDPOINT ]] || die "moto_server did not start: $(cat "$LOG")"
export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1
export AWS_ENDPOINT_URL=$ENDPOINT AWS_EC2_METADATA_DISABLED=true
curl -fsS -X PUT "$ENDPOINT/bench" >/dev/null

# --- inputs ----------------------------------------------------------------
[[ -f $WORK/key.key ]] || "$REPO" keygen "$WORK/key" --unencrypted >/dev/null
BIG=$WORK/big.tar.zst
if [[ ! -f $BIG ]]; then
    say "making a 1 GiB incompressible input"
    head -c $((1024 * 1024 * 1024)) /dev/urandom >"$BIG"
fi

# --- A: 1 GiB ----------------------------------------------------------------
say "A: kpack-repo add of 1 GiB versus curl -T (moto keeps objects in memory; each run uses a new key)"
# shellcheck disable=SC2016 # expanded by hyperfine's shell, a new name per run
hyperfine --runs "$RUNS" --export-json "$WORK/a.json" \
    -n 'kpack-repo add (1 GiB)' \
    "$REPO add s3://bench/a big-\$(date +%s%N) 1.0.0 $BIG --key $WORK/key.key" \
    -n 'curl -T (1 GiB)' \
    "curl -fsS -o /dev/null -T $BIG $ENDPOINT/bench/curl/big-\$(date +%s%N)"
/usr/bin/time -v "$REPO" add s3://bench/a big-rss 1.0.0 "$BIG" --key "$WORK/key.key" 2>"$WORK/a.time" >/dev/null
RSS_KB=$(awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}' "$WORK/a.time")
echo "kpack-repo add of 1 GiB: peak RSS $((RSS_KB / 1024)) MiB" >&2
# Where the time goes: the parts going up, then the server assembling them
# (the server's log has one-second timestamps).
plain() { sed 's/\x1b\[[0-9;]*m//g' "$LOG"; }
stamp() { plain | grep "$1" | head -1 | grep -o '[0-9][0-9]:[0-9][0-9]:[0-9][0-9]'; }
echo "big-rss: upload begun $(stamp 'big-rss/.*?uploads'), last part $(plain | grep 'big-rss/.*partNumber' | tail -1 | grep -o '[0-9][0-9]:[0-9][0-9]:[0-9][0-9]'), assembled $(stamp 'POST /bench/a/pool/big-rss/.*uploadId=')" >&2

# --- B: one-package update in a 10,000-package repository ---------------------
say "B: generating a $PACKAGES-package repository and copying it into the bucket"
INDEX=$WORK/index-$PACKAGES
if [[ ! -f $INDEX/index.toml ]]; then
    rm -rf "$INDEX"
    (cd "$ROOT" && cargo bench -q -p rocm-kpack-get --bench gen_repo -- index "$INDEX" "$WORK/key.key" "$PACKAGES" 1)
fi
"$VENV/bin/python" - "$INDEX" "$ENDPOINT" <<'EOF'
import os, sys, boto3
root, endpoint = sys.argv[1], sys.argv[2]
s3 = boto3.client("s3", endpoint_url=endpoint)
for directory, _, files in os.walk(root):
    for name in files:
        path = os.path.join(directory, name)
        key = "b/" + os.path.relpath(path, root)
        with open(path, "rb") as f:
            s3.put_object(Bucket="bench", Key=key, Body=f.read())
EOF
echo "index.toml: $(stat -c %s "$INDEX/index.toml") bytes" >&2
echo update >"$WORK/small.txt"
mkdir -p "$WORK/small" && cp "$WORK/small.txt" "$WORK/small/"
# shellcheck disable=SC2016
hyperfine --warmup 1 --runs "${RUNS_B:-10}" --export-json "$WORK/b.json" \
    -n "one-package update, $PACKAGES packages" \
    "$REPO add s3://bench/b update-\$(date +%s%N) 1.0.0 $WORK/small --key $WORK/key.key"
before=$(wc -l <"$LOG")
"$REPO" add s3://bench/b update-counted 1.0.0 "$WORK/small" --key "$WORK/key.key" >/dev/null
echo "requests of one update:" >&2
plain | tail -n +$((before + 1)) | grep -o '"[A-Z]* [^ ]* [^ ]* [0-9]*' | sed 's/^"/  /; s/ HTTP[^ ]*//' >&2
echo "  total: $(plain | tail -n +$((before + 1)) | grep -c '"[A-Z]* /')" >&2
