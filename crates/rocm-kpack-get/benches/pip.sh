#!/usr/bin/env bash
# `kpack-get pip sync` as a post-install hook: how long a sync that finds
# nothing to do takes in a large environment, against Python itself listing
# the same installed distributions.
#
#   A  kpack-get pip sync (nothing missing) in a venv of DISTS installed
#      distributions, HOSTS of them offering device extras with their gfx1100
#      device distributions present; goal: median < 100 ms
#   B  the venv's python listing every installed distribution's name with
#      importlib.metadata (what any Python-side hook would pay at least)
#   C  peak RSS of A (/usr/bin/time -v); goal < 32 MiB
#
# Usage: crates/rocm-kpack-get/benches/pip.sh
# Environment:
#   KPACK_GET   the binary (default: target/release/kpack-get, built first)
#   BENCH_DIR   work directory (default target/bench-pip)
#   DISTS       installed distributions (default 500), HOSTS (default 20)
#   RUNS        hyperfine runs (default 30)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
WORK=${BENCH_DIR:-$ROOT/target/bench-pip}
DISTS=${DISTS:-500}
HOSTS=${HOSTS:-20}
RUNS=${RUNS:-30}
VENV_PYTHON=${KPACK_TEST_VENV:-$ROOT/target/test-venv}/bin/python

for tool in hyperfine /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "pip.sh: needs $tool" >&2; exit 1; }
done
[ -x "$VENV_PYTHON" ] || { echo "pip.sh: no $VENV_PYTHON: run ./test.sh first" >&2; exit 1; }
if [ -z "${KPACK_GET:-}" ]; then
    (cd "$ROOT" && cargo build --release --quiet -p rocm-kpack-get)
    KPACK_GET=$ROOT/target/release/kpack-get
fi

rm -rf "$WORK" && mkdir -p "$WORK"
"$VENV_PYTHON" -m venv --without-pip "$WORK/venv"
PY=$WORK/venv/bin/python
"$PY" - "$DISTS" "$HOSTS" <<'PYTHON'
import sys, sysconfig, pathlib
dists, hosts = int(sys.argv[1]), int(sys.argv[2])
site = pathlib.Path(sysconfig.get_paths()["purelib"])
def dist(name, headers):
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n" + "".join(h + "\n" for h in headers) + "\nbody\n")
for i in range(dists - 2 * hosts):
    dist(f"plain-{i}", ["Requires-Dist: numpy>=1"])
for i in range(hosts):
    headers = []
    for gfx in ("gfx1100", "gfx90a", "gfx942"):
        headers += [f"Provides-Extra: device-{gfx}",
                    f'Requires-Dist: host-{i}-device-{gfx}==1.0; extra == "device-{gfx}"']
    dist(f"host-{i}", headers)
    dist(f"host-{i}-device-gfx1100", [f"Requires-Dist: host-{i}==1.0"])
PYTHON

SYNC=("$KPACK_GET" --target gfx1100 pip sync --python "$PY")
"${SYNC[@]}" | grep -q "nothing to install" || { echo "pip.sh: the sync was not a no-op" >&2; exit 1; }

echo "== A/B: sync with nothing to do vs importlib.metadata listing ($DISTS dists, $HOSTS hosts)"
hyperfine --warmup 3 --runs "$RUNS" -N --export-json "$WORK/sync.json" \
    -n "kpack-get pip sync" "${SYNC[*]}" \
    -n "python importlib.metadata" "$PY -I -c 'import importlib.metadata as m; [d.metadata[\"Name\"] for d in m.distributions()]'"

"$VENV_PYTHON" - "$WORK/sync.json" <<'PYTHON'
import json, sys
for result in json.load(open(sys.argv[1]))["results"]:
    print(f"median {result['median'] * 1000:.1f} ms  {result['command']}")
PYTHON

echo "== C: peak RSS of the sync"
/usr/bin/time -v "${SYNC[@]}" 2>&1 >/dev/null | grep "Maximum resident set size"
