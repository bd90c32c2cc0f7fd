#!/usr/bin/env bash
# An environment from an every-GPU index (RFC0012's `whl/`) pruned to one
# GPU, and a fleet's download, on the real torch-scatter-rocm 2.1.2.post7
# wheel from PyPI split by kpack-pack into 29 device wheels.
#
#   A  kpack-get --target gfx1100 pip sync --prune in a venv where pip
#      installed every device wheel (the host republished as whl/ does, its
#      own device-all an automatic requirement): median time (hyperfine,
#      the environment reinstalled before each run), peak RSS
#      (/usr/bin/time -v), the package's bytes before and after, and the
#      installer calls it made
#   B  kpack-get pip download from the explicit-extras wheels for one
#      target, for two, and for every target (--all-targets): bytes
#
# Usage: crates/rocm-kpack-get/benches/every_gpu.sh
# Environment:
#   KPACK_GET, KPACK_PACK  the binaries (default: target/release/, built first)
#   BENCH_DIR   work directory (default target/bench-every-gpu)
#   RUNS        hyperfine runs (default 5)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
WORK=${BENCH_DIR:-$ROOT/target/bench-every-gpu}
RUNS=${RUNS:-5}
TOOLS=${KPACK_TEST_VENV:-$ROOT/target/test-venv}
WHEEL=${KPACK_TEST_DOWNLOADS:-$HOME/.cache/rocm-kpack-get/test-downloads}/torch_scatter_rocm-2.1.2.post7-cp311-cp311-manylinux_2_32_x86_64.whl
PROJECT=torch-scatter-rocm

for tool in hyperfine /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "every_gpu.sh: needs $tool" >&2; exit 1; }
done
[ -x "$TOOLS/bin/python" ] || { echo "every_gpu.sh: no $TOOLS: run ./test.sh first" >&2; exit 1; }
[ -f "$WHEEL" ] || { echo "every_gpu.sh: no $WHEEL: run ./test.sh first" >&2; exit 1; }
if [ -z "${KPACK_GET:-}" ] || [ -z "${KPACK_PACK:-}" ]; then
    (cd "$ROOT" && cargo build --release --quiet -p rocm-kpack-get -p kpack-packer)
    KPACK_GET=$ROOT/target/release/kpack-get
    KPACK_PACK=$ROOT/target/release/kpack-pack
fi
export PATH=$TOOLS/bin:$PATH

rm -rf "$WORK" && mkdir -p "$WORK/whl" "$WORK/whl-next"
"$KPACK_PACK" wheel split -q -o "$WORK/split" "$WHEEL"
cp "$WORK"/split/*_device_*.whl "$WORK/whl/"
cp "$WORK"/split/*.whl "$WORK/whl-next/"
# The host as whl/ republishes it: its own device-all an automatic
# requirement, RECORD updated to match.
python3 - "$WORK/whl-next" "$WORK/whl" "$PROJECT" <<'PYTHON'
import base64, hashlib, pathlib, sys, zipfile
src, dst, project = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
host = next(p for p in src.glob("*.whl") if "_device_" not in p.name)
with zipfile.ZipFile(host) as z:
    members = [(i.filename, z.read(i)) for i in z.infolist()]
names = [n for n, _ in members]
meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
record = next(n for n in names if n.endswith(".dist-info/RECORD"))
files = dict(members)
head, sep, body = files[meta].decode().partition("\n\n")
files[meta] = (head + f"\nRequires-Dist: {project}[device-all]" + sep + body).encode()
digest = base64.urlsafe_b64encode(hashlib.sha256(files[meta]).digest()).rstrip(b"=").decode()
lines = [f"{meta},sha256={digest},{len(files[meta])}" if l.startswith(meta + ",") else l
         for l in files[record].decode().splitlines()]
files[record] = ("\n".join(lines) + "\n").encode()
with zipfile.ZipFile(dst / host.name, "w", zipfile.ZIP_DEFLATED) as z:
    for name in names:
        z.writestr(name, files[name])
PYTHON

python3 -m venv "$WORK/venv"
PY=$WORK/venv/bin/python
INSTALL=("$PY" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-index --find-links "$WORK/whl" "$PROJECT")
"${INSTALL[@]}"
SITE=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['platlib'])")
count() { "$PY" -m pip list --disable-pip-version-check 2>/dev/null | grep -c "^$PROJECT" || true; }
before=$(du -sb "$SITE/torch_scatter" | cut -f1)
dists_before=$(count)
# The kpack layout, so the bytes are the archives' whatever HIP runtime
# this machine has (the fat layout would materialize gfx1100's code).
PRUNE=("$KPACK_GET" --layout kpack --target gfx1100 pip sync --prune --python "$PY" -- --no-index --find-links "$WORK/whl")
PRUNE_JSON=("$KPACK_GET" --layout kpack --target gfx1100 --json pip sync --prune --python "$PY" -- --no-index --find-links "$WORK/whl")

echo "== A: pip sync --prune, every GPU -> gfx1100"
/usr/bin/time -v "${PRUNE_JSON[@]}" >"$WORK/prune.json" 2>"$WORK/prune.time" || { cat "$WORK/prune.time"; exit 1; }
after=$(du -sb "$SITE/torch_scatter" | cut -f1)
echo "torch_scatter/: $before bytes, $dists_before distributions -> $after bytes, $(count) distributions"
python3 - "$WORK/prune.json" <<'PYTHON'
import json, sys
report = json.load(open(sys.argv[1]))
prune = report["prune"]
print(f"uninstalled {len(prune['removed'])} distributions ({prune['freed']} bytes by their RECORDs) with {prune['installer']}; installer calls: {1 if prune['removed'] else 0} uninstall, {1 if report['installed'] else 0} install")
PYTHON
grep -E "Maximum resident|Elapsed" "$WORK/prune.time"
hyperfine --runs "$RUNS" --prepare "${INSTALL[*]}" "${PRUNE[*]}" --export-json "$WORK/prune-hyperfine.json"

echo "== B: pip download from the explicit-extras wheels"
for targets in gfx1100 gfx942,gfx1100 all; do
    dir=$WORK/download-$targets
    if [ "$targets" = all ]; then flags=(--all-targets); else flags=(); fi
    "$KPACK_GET" --target "${targets/all/gfx1100}" pip download -q -d "$dir" "$PROJECT" "${flags[@]}" \
        --python "$PY" -- --no-index --find-links "$WORK/whl-next"
    echo "$targets: $(ls "$dir" | wc -l) wheels, $(du -sb "$dir" | cut -f1) bytes"
done
