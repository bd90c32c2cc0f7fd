"""Writes a wheel for the tests, with a RECORD computed here (independently
of the packer), then spoils it as asked.

Reads a JSON object on stdin:
  out         the wheel to write
  from        optional: a wheel whose members (RECORD aside) come first
  files       [[member, source file], ...] added after them
  unrecorded  members RECORD leaves out
  tamper      {member: text}: contents replaced after RECORD was made
  phantom     RECORD lines for files the wheel does not hold
  hashless    true: RECORD lists every member without hash or size, as
              onnxruntime-rocm's does
"""
import base64
import hashlib
import json
import sys
import warnings
import zipfile

warnings.simplefilter("ignore")  # a duplicate member is asked for on purpose

spec = json.load(sys.stdin)
members = []
if spec.get("from"):
    with zipfile.ZipFile(spec["from"]) as source:
        for info in source.infolist():
            if not info.filename.endswith(".dist-info/RECORD"):
                members.append((info.filename, source.read(info), info.external_attr >> 16))
for name, path in spec.get("files", []):
    with open(path, "rb") as f:
        members.append((name, f.read(), 0o100755 if path.endswith(".so") else 0o100644))
dist_info = next(n for n, _, _ in members if n.endswith(".dist-info/METADATA")).rsplit("/", 1)[0]
record = []
for name, data, _ in members:
    if name in spec.get("unrecorded", []):
        continue
    if spec.get("hashless"):
        record.append(f"{name},,")
        continue
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={digest},{len(data)}")
record.extend(spec.get("phantom", []))
record.append(f"{dist_info}/RECORD,,")
tamper = spec.get("tamper", {})
with zipfile.ZipFile(spec["out"], "w", zipfile.ZIP_DEFLATED) as wheel:
    for name, data, mode in members:
        info = zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0))
        info.external_attr = mode << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        wheel.writestr(info, tamper[name].encode() if name in tamper else data)
    wheel.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
