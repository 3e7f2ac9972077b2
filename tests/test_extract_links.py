"""`ce trial files --extract` (and every restore that refuses links out of the workspace)
checks each link as the disk resolves it: `restore_workspace` compared the link's text,
normalized, with the root, so an agent's `sub/l1 -> ..` beside `sub/c -> l1/..` (the
text stays inside, the path leads to the root's parent) was extracted, a link out of
the person's copy, which the extraction promises to refuse."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from ce_runtime.cli import main
from ce_runtime.store.workspace_snapshot import OutwardLink, restore_workspace

CE = [sys.executable, "-m", "ce_runtime.cli"]

TASK = """\
task_id: links
description: the agent chains two links out of its workspace
initial_prompt: link
agent:
  type: script
  script:
    - run: mkdir sub && ln -s .. sub/l1 && ln -s l1/.. sub/c && echo x > kept.txt
sandbox: {driver: tempdir, python: null}
success_criteria:
  - {type: file_exists, path: kept.txt, description: kept}
"""


def test_extract_refuses_a_link_that_leaves_through_another(tmp_path):
    (tmp_path / "links.yaml").write_text(TASK)
    res = subprocess.run([*CE, "run", "links.yaml", "--run-dir", "run"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "CE_PLAIN": "1"})
    assert res.returncode == 0, res.stderr
    dest = tmp_path / "copy"
    out = CliRunner().invoke(main, ["trial", "files", str(tmp_path / "run/default/links/00"),
                                    "--extract", str(dest)])
    assert out.exit_code != 0, out.output
    assert "'sub/c': a link the agent made pointing out of the workspace" in out.output
    assert not os.path.lexists(dest / "sub" / "c")


@pytest.mark.parametrize("files", [
    {"sub/l1": {"link": ".."}, "sub/c": {"link": "l1/.."}},
    {"sub/c": {"link": "x/.."}, "sub/x": {"link": ".."}},  # redirected by a later link
])
def test_restore_refuses_links_out_by_resolution_and_allows_them_when_asked(tmp_path, files):
    (tmp_path / "objects").mkdir()
    with pytest.raises(OutwardLink, match="'sub/c'"):
        restore_workspace({"files": files}, str(tmp_path / "objects"), str(tmp_path / "a"))
    restore_workspace({"files": files}, str(tmp_path / "objects"), str(tmp_path / "b"),
                      outward_links=True)  # re-grading: as the agent made them
    assert os.path.realpath(tmp_path / "b" / "sub" / "c") == str(tmp_path)


def test_links_that_stay_inside_through_others_are_restored(tmp_path):
    (tmp_path / "objects").mkdir()
    files = {"sub/c": {"link": "../a"}, "a": {"link": "sub"}, "d/e": {"link": "../sub/c"}}
    restore_workspace({"files": files}, str(tmp_path / "objects"), str(tmp_path / "w"))
    assert os.path.realpath(tmp_path / "w" / "d" / "e") == str(tmp_path / "w" / "sub")
