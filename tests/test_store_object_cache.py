"""Objects read by re-grading are kept in memory once checked; a changed object is
never answered from memory (it is checked again, and refused)."""

from __future__ import annotations

import hashlib
import os

import pytest

from ce_runtime.store import workspace_snapshot as A
from ce_runtime.store.snapshot_view import SnapshotView


def _archive(tmp_path, data: bytes):
    objects = tmp_path / "objects"
    digest = hashlib.sha256(data).hexdigest()
    (objects / digest[:2]).mkdir(parents=True)
    obj = objects / digest[:2] / digest[2:]
    obj.write_bytes(data)
    manifest = {"version": 1, "files": {"a.txt": {"sha256": digest, "mode": 0o644,
                                                  "size": len(data)}}}
    return manifest, str(objects), str(obj)


def test_a_checked_object_is_read_once(tmp_path):
    manifest, objects, obj = _archive(tmp_path, b"hello\n")
    assert SnapshotView(manifest, objects).read("a.txt") == b"hello\n"
    assert A._OBJECT_BYTES[obj] == (A._VERIFIED[obj], b"hello\n")  # kept, as checked
    assert SnapshotView(manifest, objects).read("a.txt") == b"hello\n"


def test_a_changed_object_is_checked_again_and_refused(tmp_path):
    manifest, objects, obj = _archive(tmp_path, b"hello\n")
    assert SnapshotView(manifest, objects).read("a.txt") == b"hello\n"
    with open(obj, "r+b") as fh:  # same inode and size, new bytes (and mtime)
        fh.write(b"HELLO\n")
    st = os.stat(obj)
    os.utime(obj, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    with pytest.raises(A.DamagedArchive, match="does not match its digest"):
        SnapshotView(manifest, objects)


def test_an_unchecked_file_is_not_kept(tmp_path):
    path = tmp_path / "loose"
    path.write_bytes(b"x")
    assert A.object_bytes(str(path)) == b"x"
    assert str(path) not in A._OBJECT_BYTES
