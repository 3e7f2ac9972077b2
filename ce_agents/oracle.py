"""The `oracle` agent: applies the task's reference solution, so that
`ce run --agent oracle` proves a task solvable (and its criteria able to pass).

What it does, in order (paths in `reference` are relative to the task directory):
1. `reference.directory`: one turn that writes every file of the tree into the
   workspace, one Write call per file (VCS and cache directories skipped, file modes
   kept). Each `reference_comparison` criterion whose `agent_file` differs from its
   `reference_file` also gets that file written at its `agent_file`.
2. `reference.file` / `reference.code`: one turn that writes it at the `agent_file` of
   every `reference_comparison` criterion (an `agent_file` glob names no single place:
   skipped, with a system message saying so).
3. `reference.solve`: a shell command, run as one Bash turn (a non-zero exit is an
   error: the reference does not apply); or a list of script actions, replayed exactly
   as the script agent replays `agent.script`.
What its commands leave running is killed when it returns.
It fails when there is no reference, a reference file cannot be read or written, or
nothing tells it where the reference goes.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from ce_agents.script import ScriptPlayer
from ce_runtime.execute.agent_protocol import GRADER, AgentOutcome, AgentRequest, EventSink

SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".pytest_cache",
                          ".ruff_cache", ".mypy_cache", ".venv", "node_modules"})


class OracleError(Exception):
    pass


class _File:
    """A file the oracle writes: its bytes, its mode, and what the trace shows."""

    def __init__(self, data: bytes, mode: int | None = None):
        self.data = data
        self.mode = mode
        try:
            self.shown: str = data.decode("utf-8")
            self.text: str | None = self.shown
        except UnicodeDecodeError:
            self.shown, self.text = f"<binary file, {len(data)} bytes>", None


class OracleAgent:
    """The task author's own solution: it is trusted, so its commands run with the
    grader's view (TASK_DIR and REFERENCE_DIR set, the task directory reachable) while
    its file writes stay as confined as any agent's."""

    name = "oracle"
    trusted = True

    async def run(self, request: AgentRequest, sink: EventSink,
                  stop: asyncio.Event) -> AgentOutcome:
        player = ScriptPlayer(self.name, request, sink, stop, view=GRADER)
        player.start()
        return player.finish(await self._solve(player, request))

    async def _solve(self, player: ScriptPlayer, request: AgentRequest) -> AgentOutcome:
        ref = request.reference or {}
        solve = ref.get("solve")
        if not any(ref.get(k) is not None for k in ("directory", "file", "code", "solve")):
            return AgentOutcome("error", "the task has no reference solution for the oracle")
        warnings: list[str] = []
        try:
            files = planned_files(request, ref, warnings)
        except OracleError as exc:
            return AgentOutcome("error", str(exc))
        for w in warnings:
            player.say(f"oracle: {w}", role="system")
        if not files and solve is None:
            return AgentOutcome("error", "the oracle has nothing to apply: "
                                + (warnings[-1] if warnings else "the reference is empty"))
        if files:
            outcome = await player.turn(lambda: _write_all(player, files))
            if outcome is not None:
                return outcome
        if isinstance(solve, str):
            return await player.turn(lambda: _run_solve(player, solve)) \
                or AgentOutcome("finished")
        if solve is not None:
            return await player.replay(solve, "reference.solve")
        return AgentOutcome("finished")


async def _write_all(player: ScriptPlayer, files: dict[str, _File]) -> AgentOutcome | None:
    failed = [rel for rel, f in files.items()
              if not await player.write(rel, f.text if f.text is not None else f.data,
                                        f.mode, shown=f.shown)]
    if failed:
        return AgentOutcome("error", f"the oracle could not write {', '.join(failed)} "
                            "(see the Write results in the trace)")
    return None


async def _run_solve(player: ScriptPlayer, command: str) -> AgentOutcome | None:
    res = await player.run(command)
    if res is None:
        return AgentOutcome("stopped")
    if res.timed_out or res.exit_code != 0:
        return AgentOutcome("error", f"reference.solve exited with {res.exit_code} "
                            "(see its Bash result in the trace)")
    return None


def planned_files(request: AgentRequest, ref: dict[str, Any], warnings: list[str]
                  ) -> dict[str, _File]:
    """Workspace-relative path -> file, in writing order (a later entry for the same path
    replaces the earlier one in place)."""
    files: dict[str, _File] = {}
    comparisons = [c for c in request.criteria if c.get("type") == "reference_comparison"]
    if ref.get("directory") is not None:
        root = os.path.join(request.task_dir, ref["directory"])
        if not os.path.isdir(root):
            raise OracleError(f"reference.directory {ref['directory']} is not a directory "
                              f"(looked in {root})")
        for rel in _tree(root):
            files[rel] = _read(os.path.join(root, rel), "reference.directory", keep_mode=True)
        for c in comparisons:
            args = c.get("args") or {}
            agent_file, ref_file = args.get("agent_file"), args.get("reference_file")
            if not agent_file or not ref_file or _is_glob(agent_file, c, warnings):
                continue
            src = os.path.normpath(ref_file)
            if os.path.normpath(agent_file) != src:
                if src not in files:
                    warnings.append(f"{c.get('id', '?')}: reference_file {ref_file} is not "
                                    "in the reference directory")
                    continue
                files[os.path.normpath(agent_file)] = files[src]
    if ref.get("file") is not None or ref.get("code") is not None:
        if ref.get("file") is not None:
            content = _read(os.path.join(request.task_dir, ref["file"]), "reference.file")
        else:
            content = _File(ref["code"].encode("utf-8"))
        targets = [os.path.normpath(a) for c in comparisons
                   if (a := (c.get("args") or {}).get("agent_file"))
                   and not _is_glob(a, c, warnings)]
        if not targets:
            warnings.append("no reference_comparison criterion names an `agent_file` where "
                            "the reference goes (add `reference.solve` to say how to apply it)")
        for target in targets:
            files[target] = content
    return files


def _is_glob(agent_file: str, criterion: dict[str, Any], warnings: list[str]) -> bool:
    if any(ch in agent_file for ch in "*?["):
        warnings.append(f"{criterion.get('id', '?')}: agent_file {agent_file} is a glob, not "
                        "a single place: the reference is not written there")
        return True
    return False


def _tree(root: str) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
        rel_dir = os.path.relpath(dirpath, root)
        out.extend(os.path.normpath(os.path.join(rel_dir, f)) for f in sorted(filenames))
    return out


def _read(path: str, what: str, keep_mode: bool = False) -> _File:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        mode = os.stat(path).st_mode & 0o777 if keep_mode else None
    except OSError as exc:
        raise OracleError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    return _File(data, mode)
