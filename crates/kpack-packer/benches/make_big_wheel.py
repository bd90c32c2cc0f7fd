"""Makes a synthetic fat wheel of at least 2 GiB from the jax ROCm plugin
wheel: all its members, its fat libraries copied under COPIES more paths,
and large filler members (incompressible blobs stored as they are, and
library-like data deflated), with a RECORD computed while writing. Every
member is streamed: the script never holds a blob in memory.

    python3 make_big_wheel.py FIXTURE.whl OUT.whl
"""
import base64
import hashlib
import os
import sys
import zipfile

MIB = 1 << 20
STORED_BLOBS = 7  # 256 MiB each, random: ~1.75 GiB in the wheel
DEFLATED_BLOBS = 4  # 256 MiB each, library bytes: ~0.4 GiB in the wheel
BLOB_MIB = 256
COPIES = 20

fixture, out = sys.argv[1], sys.argv[2]
record = []
source = zipfile.ZipFile(fixture)
dist_info = next(n for n in source.namelist() if n.endswith(".dist-info/RECORD")).rsplit("/", 1)[0]


def add(wheel, name, chunks, method):
    info = zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0))
    info.compress_type = method
    info.external_attr = (0o100755 if name.endswith(".so") else 0o100644) << 16
    digest, size = hashlib.sha256(), 0
    with wheel.open(info, "w", force_zip64=True) as member:
        for chunk in chunks:
            digest.update(chunk)
            size += len(chunk)
            member.write(chunk)
    hashed = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={hashed},{size}")


libraries = {n: source.read(n) for n in source.namelist() if n.endswith(".so")}
library_bytes = b"".join(libraries.values())


def library_like(blob):
    """BLOB_MIB MiB of library bytes, each MiB made distinct."""
    for i in range(BLOB_MIB):
        start = (i * MIB) % (len(library_bytes) - MIB)
        chunk = bytearray(library_bytes[start : start + MIB])
        chunk[:16] = f"{blob:08d}{i:08d}".encode()
        yield bytes(chunk)


def random_blob():
    for _ in range(BLOB_MIB):
        yield os.urandom(MIB)


with zipfile.ZipFile(out + ".part", "w", compresslevel=1) as wheel:
    for info in source.infolist():
        if info.filename.startswith(dist_info + "/"):
            continue
        add(wheel, info.filename, [source.read(info)], zipfile.ZIP_DEFLATED)
    for copy in range(COPIES):
        for name, data in libraries.items():
            package, file = name.split("/", 1)
            add(wheel, f"{package}/copies/c{copy:02d}/{file}", [data], zipfile.ZIP_DEFLATED)
    for blob in range(STORED_BLOBS):
        add(wheel, f"jax_rocm7_plugin/data/blob{blob}.bin", random_blob(), zipfile.ZIP_STORED)
    for blob in range(DEFLATED_BLOBS):
        add(wheel, f"jax_rocm7_plugin/data/lib{blob}.bin", library_like(blob), zipfile.ZIP_DEFLATED)
    for info in source.infolist():
        if info.filename.startswith(dist_info + "/") and not info.filename.endswith("/RECORD"):
            add(wheel, info.filename, [source.read(info)], zipfile.ZIP_DEFLATED)
    record.append(f"{dist_info}/RECORD,,")
    wheel.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
os.rename(out + ".part", out)
