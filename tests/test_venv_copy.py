"""A trial's venv copied from its template: from memory when the template is small, with
what shutil.copytree(symlinks=True) would make (entries, contents, modes, times), and
read again when the template changed."""

from __future__ import annotations

import os
import shutil

from ce_runtime.execute.sandbox import venvs


def tree(root) -> dict[str, tuple]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            if os.path.islink(path):
                out[rel] = ("l", os.readlink(path), st.st_mtime_ns)
            elif os.path.isdir(path):
                out[rel] = ("d", st.st_mode, st.st_mtime_ns)
            else:
                with open(path, "rb") as fh:
                    out[rel] = ("f", st.st_mode, st.st_mtime_ns, fh.read())
    st = os.stat(root)
    out["."] = ("d", st.st_mode, st.st_mtime_ns)
    return out


def make_template(root):
    os.makedirs(root / "bin")
    os.makedirs(root / "lib" / "python3" / "site-packages")
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (root / "bin" / "activate").write_text("# activate\n" * 50)
    (root / "bin" / "tool").write_bytes(b"#!/bin/sh\n\x00\xffbinary")
    (root / "bin" / "tool").chmod(0o751)
    os.symlink("/usr/bin/python3", root / "bin" / "python")
    os.symlink("python", root / "bin" / "python3")
    os.symlink("lib", root / "lib64")
    (root / "lib" / "python3" / "site-packages").chmod(0o750)
    for i, path in enumerate(sorted(root.rglob("*"))):
        os.utime(path, ns=(1_000_000_000 + i, 2_000_000_000 + i * 7), follow_symlinks=False)
    os.utime(root, ns=(5, 6))


def test_a_copy_is_what_copytree_makes(tmp_path):
    src = tmp_path / "template"
    make_template(src)
    venvs.forget_templates()
    shutil.copytree(src, tmp_path / "by-copytree", symlinks=True)
    venvs.copy_tree(str(src), str(tmp_path / "first"))
    venvs.copy_tree(str(src), str(tmp_path / "second"))  # from memory
    expected = tree(tmp_path / "by-copytree")
    assert expected == tree(src) | {".": expected["."]}
    assert tree(tmp_path / "first") == expected
    assert tree(tmp_path / "second") == expected
    assert venvs._SNAPSHOTS[str(src)] is not None  # kept in memory
    # each copy is its own: editing one leaves the template and the others alone
    (tmp_path / "second" / "bin" / "activate").write_text("changed")
    assert tree(tmp_path / "first") == expected


def test_a_changed_template_is_read_again(tmp_path):
    src = tmp_path / "template"
    make_template(src)
    venvs.forget_templates()
    venvs.copy_tree(str(src), str(tmp_path / "a"))
    (src / "bin" / "activate").write_text("# new activate\n")
    (src / "bin" / "new-tool").write_text("new\n")
    venvs.copy_tree(str(src), str(tmp_path / "b"))
    assert (tmp_path / "b" / "bin" / "activate").read_text() == "# new activate\n"
    assert (tmp_path / "b" / "bin" / "new-tool").read_text() == "new\n"
    shutil.copytree(src, tmp_path / "c", symlinks=True)
    assert tree(tmp_path / "b") == tree(tmp_path / "c")


def test_a_big_template_or_a_special_file_is_copied_by_copytree(tmp_path, monkeypatch):
    src = tmp_path / "template"
    make_template(src)
    venvs.forget_templates()
    monkeypatch.setattr(venvs, "SMALL_TEMPLATE", 10)
    venvs.copy_tree(str(src), str(tmp_path / "a"))
    assert venvs._SNAPSHOTS[str(src)] is None
    shutil.copytree(src, tmp_path / "b", symlinks=True)
    assert tree(tmp_path / "a") == tree(tmp_path / "b")
    fifo_src = tmp_path / "with-fifo"
    make_template(fifo_src)
    os.mkfifo(fifo_src / "pipe")
    monkeypatch.setattr(venvs, "SMALL_TEMPLATE", 1 << 20)
    calls = []
    monkeypatch.setattr(venvs.shutil, "copytree", lambda *a, **k: calls.append(a))
    venvs.copy_tree(str(fifo_src), str(tmp_path / "c"))
    assert calls and venvs._SNAPSHOTS[str(fifo_src)] is None
