"""The tree's start-up code, run in a child process of its own (:mod:`ddcheck.base.children`:
``python -m ddcheck.config.child FD FOLDER offline|online``).

Why a process: the run imports the tree's modules under their own names and patches ``sys.modules``,
the environment, torch's device probes and tensor factories, the root logger and the profile hook
(:mod:`ddcheck.tree.runtime`); all of it stays in the child, as smoke's runs stay in its own. The
child is kept for the next launch of the same process (the Python API, the tests), so its tree
sessions are reused as they were in-process; each request carries the caller's environment and working
folder, set for its run. The child runs the tree's code offline (:mod:`ddcheck.config.offline`: the Hugging
Face libraries' offline switches from its start, sockets and DNS refused at once) unless the request allows
downloads; a request of the other kind gets a child of its own.

The answer is :class:`Judged` (the Report's JSON and what the run read), a usage error, or an error. A
child that dies or does not answer in time is *could not judge* (exit 3) with why, never a traceback.
"""

from __future__ import annotations

import atexit
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from ddcheck.base.children import Child, serve
from ddcheck.base.errors import UsageError
from ddcheck.config.kept import Judged, state
from ddcheck.config.offline import GUARD, OFFLINE_ENV, offline_env
from ddcheck.tree.sources import SourceTree

CHILD = ["-m", "ddcheck.config.child"]  # the interpreter's arguments that start the child
TIMEOUT = 1800.0  # seconds one launch may take in the worker
TREES_KEPT = 6  # trees whose sessions the child keeps (ddcheck.config.treerun.SESSIONS_KEPT), least recently used out first


# --------------------------------------------------------------------------- the caller's side


def spec_of(tree: SourceTree) -> str:
    """What the worker opens for ``tree`` (relative to the caller's working folder, as it was given)."""
    if tree.kind == "wheel" and tree.wheel is not None:
        return str(tree.wheel)
    if tree.kind == "dir" and tree.root is not None:
        return str(tree.root)
    if tree.kind == "file" and tree.files and tree.files[0].disk:
        return tree.files[0].disk
    raise UsageError(f"{tree.label}: not a tree on disk; config runs the tree's code from its files")


_TREES: dict[int, SourceTree] = {}  # trees named in the child by their ids (_token), kept alive meanwhile


def request(tree: SourceTree, argv: list[str], file: str | None, draft_config: str | None,
            model_config: str | None, machine, allow_downloads: bool = False) -> dict:
    """One launch to judge, with the caller's environment and working folder; ``allow_downloads``: the
    tree's code may use the network (else the worker runs it offline, :mod:`ddcheck.config.offline`)."""
    return {"target": spec_of(tree), "label": tree.label, "argv": list(argv), "file": file,
            "draft_config": draft_config, "model_config": model_config, "gpu": asdict(machine),
            "env": dict(os.environ), "cwd": os.getcwd(), "allow_downloads": bool(allow_downloads)}


def _start(offline: bool) -> Child:
    # offline from the start: the Hugging Face libraries read their offline switches when imported
    env = offline_env(dict(os.environ)) if offline else dict(os.environ)
    child = Child(CHILD, env, ("offline" if offline else "online",), prefix="ddcheck-config-")
    child.offline = offline
    return child


_CHILDREN: list[Child] = []


@atexit.register
def close_child() -> None:
    """End the kept worker (it also ends by itself when this process's end closes its stdin)."""
    while _CHILDREN:
        _CHILDREN.pop().close()


def _token(tree: SourceTree) -> str:
    """The name of ``tree`` in the child, whose kept session of it answers every launch on the same tree:
    its content key (the same wheel, or the same folder with the same files, opened again by the caller is
    the same tree there; a folder whose files changed is a new one), else the caller's object."""
    from ddcheck.config.kept import content_key

    named = content_key(tree)
    if named is not None:
        return named
    _TREES.pop(id(tree), None)
    _TREES[id(tree)] = tree  # kept alive, so that its id names no other tree meanwhile
    while len(_TREES) > TREES_KEPT:
        _TREES.pop(next(iter(_TREES)))
    return f"object {id(tree)}"


def judge_in_child(tree: SourceTree, req: dict) -> Judged:
    """The launch judged in the worker (started on first use, kept for the next launch)."""
    offline = not req.get("allow_downloads")
    if _CHILDREN and (not _CHILDREN[0].alive() or _CHILDREN[0].offline != offline):
        close_child()
    if not _CHILDREN:
        _CHILDREN.append(_start(offline))
    answer = _CHILDREN[0].ask({**req, "token": _token(tree)}, TIMEOUT)
    if "judged" in answer:
        return Judged.model_validate(answer["judged"])
    if "usage" in answer:
        raise UsageError(answer["usage"])
    if "died" in answer:
        close_child()
        why = f"the config child process that runs it {answer['died']}"
    else:
        why = f"the config child process failed: {answer.get('error')}"
    return _not_judged(tree, req, f"the tree's start-up code could not be run: {why}")


def _not_judged(tree: SourceTree, req: dict, why: str) -> Judged:
    from ddcheck.config.report import GpuReport, Report
    from ddcheck.config.words import server_argv

    gpu = req["gpu"]
    args = server_argv(req["argv"])
    if req.get("file") is not None:
        args = ["--config", str(req["file"])] + args
    report = Report(target=tree.label, release="unknown", argv=args, not_judged=[why],
                    gpu=GpuReport(**{k: gpu[k] for k in GpuReport.model_fields if k in gpu}))
    return Judged(report=report.model_dump_json(), judged=False)


# --------------------------------------------------------------------------- the worker's side


class _Reads:
    """Files the run opens for reading outside the tree, the Python installation, ddcheck's code and
    cache, and the run's own private folders: their states, for the result cache's manifest."""

    def __init__(self, tree: SourceTree) -> None:
        import site

        from ddcheck.rules import rules_dir
        from ddcheck.tree.runtime import TREE_DIR_PREFIX
        from ddcheck.tree.sources import cache_dir

        roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, *site.getsitepackages(), site.getusersitepackages(),
                 str(Path(__file__).resolve().parents[1]), str(rules_dir().resolve()), str(cache_dir()),
                 "/proc", "/sys", "/dev"}
        for t in (tree.root, tree.wheel):
            if t is not None:
                roots.add(os.path.abspath(t))
        self.roots = tuple(os.path.join(os.path.abspath(r), "") for r in roots if r)
        self.private = os.path.join(tempfile.gettempdir(), TREE_DIR_PREFIX)
        self.paths: set[str] = set()

    def opened(self, path, mode, flags) -> None:
        if isinstance(path, int) or not isinstance(path, (str, bytes, os.PathLike)):
            return
        if isinstance(mode, str) and any(c in mode for c in "wax+"):
            return
        if isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            return
        path = os.path.abspath(os.fsdecode(path))
        if path.startswith(self.private) or (path + os.sep).startswith(self.roots):
            return
        self.paths.add(path)

    def states(self) -> dict[str, str]:
            return {p: state(p) for p in sorted(self.paths)}


_RECORDING: list[_Reads] = []


def _audit(event: str, args) -> None:
    if event == "open" and _RECORDING:
        _RECORDING[-1].opened(*args)


def _serve(req: dict, trees: dict) -> dict:
    import traceback

    from ddcheck.config.words import jsonable
    from ddcheck.config.gpu import Gpu
    from ddcheck.config.judge import judge
    from ddcheck.tree.sources import TargetError, open_target

    offline = GUARD.installed
    os.environ.clear()
    os.environ.update(offline_env(req["env"]) if offline else req["env"])
    os.chdir(req["cwd"])
    from ddcheck.rules import follow_rule_path

    follow_rule_path()  # the caller's DDCHECK_RULE_PATH, as its environment says
    GUARD.attempts.clear()
    GUARD.waits_skipped = 0
    GUARD.set_by_ddcheck = {k for k, v in OFFLINE_ENV.items() if offline and req["env"].get(k) != v}
    tree = trees.pop(req["token"], None)
    try:
        if tree is None:
            tree = open_target(req["target"])
            tree.label = req["label"]
    except TargetError as exc:
        return {"usage": str(exc)}
    trees[req["token"]] = tree
    while len(trees) > TREES_KEPT:
        trees.pop(next(iter(trees)))
    reached: list[bool] = []
    reads = _Reads(tree)
    _RECORDING.append(reads)
    try:
        report = judge(req["argv"], tree, req["file"], req["draft_config"], req["model_config"], Gpu(**req["gpu"]),
                       smoke=lambda s, t: reached.append(True))
    except UsageError as exc:
        return {"usage": str(exc)}
    except Exception as exc:  # noqa: BLE001 - said as could-not-judge by the caller
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return {"error": f"{type(exc).__name__}: {exc} (at {where.filename}:{where.lineno})"}
    finally:
        _RECORDING.pop()
    if report.settings is not None:  # ddcheck's offline switches are not the launch's environment
        for name in GUARD.set_by_ddcheck:
            report.settings.env.pop(name, None)
    values = {k: v for k, v in (report.settings.values if report.settings else {}).items() if jsonable(v)}
    return {"judged": {"report": report.model_dump_json(), "values": values, "checked_to_the_end": bool(reached),
                       "judged": report.judged, "reads": reads.states()}}


def main() -> None:
    # the parent's folder is this child's temporary folder (serve): what it leaves there goes with it
    if sys.argv[3:4] != ["online"]:  # no socket to the network, no DNS lookup: refused at once
        GUARD.install()
    sys.addaudithook(_audit)
    trees: dict = {}
    serve(lambda req: _serve(req, trees))


if __name__ == "__main__":
    main()
