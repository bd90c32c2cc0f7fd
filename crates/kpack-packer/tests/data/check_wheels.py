"""Checks wheels as an installer would see them and prints, as JSON, what
each declares: every member listed in RECORD with its sha256 (urlsafe
base64, no padding) and size, RECORD itself without; METADATA parsed and
validated by `packaging` (with a first argument `--unvalidated`, parsed
without validation: for wheels whose authors wrote METADATA that
`packaging` rejects); the zip timestamps used.
"""
import base64
import csv
import hashlib
import json
import sys
import zipfile

from packaging.metadata import Metadata

validate = sys.argv[1:2] != ["--unvalidated"]
paths = sys.argv[1:] if validate else sys.argv[2:]
found = {}
for path in paths:
    with zipfile.ZipFile(path) as wheel:
        assert wheel.testzip() is None, path
        names = wheel.namelist()
        [record_name] = [n for n in names if n.endswith(".dist-info/RECORD")]
        rows = list(csv.reader(wheel.read(record_name).decode().splitlines()))
        listed = {row[0]: row[1:] for row in rows}
        assert sorted(listed) == sorted(names), (path, sorted(listed), sorted(names))
        for name in names:
            if name == record_name:
                assert listed[name] == ["", ""], listed[name]
                continue
            data = wheel.read(name)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            assert listed[name] == ["sha256=" + digest.decode(), str(len(data))], (path, name)
        metadata = Metadata.from_email(
            wheel.read(record_name[: -len("RECORD")] + "METADATA"), validate=validate
        )
        found[path.rsplit("/", 1)[-1]] = {
            "name": str(metadata.name),
            "version": str(metadata.version),
            "extras": [str(e) for e in metadata.provides_extra or []],
            "requires": [str(r) for r in metadata.requires_dist or []],
            "members": names,
            "times": sorted({"%04d-%02d-%02d %02d:%02d:%02d" % i.date_time for i in wheel.infolist()}),
            "modes": {i.filename: oct(i.external_attr >> 16) for i in wheel.infolist()},
        }
print(json.dumps(found))
