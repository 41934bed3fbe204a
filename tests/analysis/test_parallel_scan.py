"""A large tree is triaged and analysed in forked workers (ddcheck/analysis/forked.py): the result
must be the one a single process gives, whatever the workers were handed, and a worker that dies or
fails must not lose or invent anything."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ddcheck.analysis import names, scan, forked
from ddcheck.analysis.chunk import ChunkAnalysis
from ddcheck.scan.api import open_targets, scan_trees_with_settings
from ddcheck.scan.settings import Settings

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "analysis"
pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="workers are forked")


def _tree(root: Path, foreign_caller: bool = True) -> Path:
    """A package of more files than a scan forks for: the analysis fixtures, filler modules, a file
    that is not UTF-8, a suppression, and a module that calls a helper on another object."""
    pkg = root / "pkg"
    pkg.mkdir()
    shutil.copy(FIXTURES / "threading.py", pkg / "backend.py")
    shutil.copytree(FIXTURES / "crossmod" / "pkg", pkg / "crossmod")
    shutil.copytree(FIXTURES / "mixins" / "pkg", pkg / "mixins")
    (pkg / "helpers.py").write_text((FIXTURES / "helpers.py").read_text().replace(
        "self.speculative_num_draft_tokens)", "self.speculative_num_draft_tokens)  # ddcheck: ignore[DD001] -- test"))
    (pkg / "latin1.py").write_bytes(b"x = '\xff'\n")
    if foreign_caller:
        (pkg / "excluded").mkdir()
        (pkg / "excluded" / "caller.py").write_text("def step(backend, lens):\n    backend._verify_layout(lens)\n")
    for i in range(scan.PARALLEL_MIN_FILES):
        (pkg / f"filler_{i}.py").write_text(f"def f{i}(x):\n    return x.g{i}(1)\n")
    return pkg


def _scan(pkg: Path, jobs: int, settings: Settings | None = None):
    trees, errors = open_targets([str(pkg)])
    assert not errors
    return scan_trees_with_settings(trees, settings or Settings(), jobs=jobs)


def test_workers_give_what_one_process_gives(tmp_path, monkeypatch):
    pkg = _tree(tmp_path)
    settings = Settings(exclude=["*excluded/*"])
    ran = []
    run = forked.run
    monkeypatch.setattr(forked, "run", lambda *a: ran.append(run(*a)) or ran[-1])
    pooled = _scan(pkg, 2, settings)
    assert len(ran) == 1 and ran[0] is not None  # the tree really went through the workers
    single = _scan(pkg, 1, settings)
    assert pooled.to_json() == single.to_json()
    assert {f.rule for f in pooled.findings} >= {"DD001"}
    assert [e.path for e in pooled.errors] == [str(pkg / "latin1.py")]
    assert pooled.files_scanned == len(list(pkg.rglob("*.py"))) - 1  # the excluded caller is not scanned


def test_an_excluded_file_still_counts_as_a_caller_in_workers(tmp_path):
    """``backend._verify_layout(...)`` in an excluded module cannot be handed W: the helper's finding
    gets no threaded fix, as in one process; without that module it does."""
    def layout_fix(pkg: Path):
        result = _scan(pkg, 2, Settings(exclude=["*excluded/*"]))
        [f] = [f for f in result.findings if f.function == "Backend._verify_layout"]
        return f.fix

    with_caller, without = tmp_path / "a", tmp_path / "b"
    with_caller.mkdir(), without.mkdir()
    assert layout_fix(_tree(without, foreign_caller=False)) is not None
    assert layout_fix(_tree(with_caller)) is None


def test_a_worker_that_dies_leaves_the_scan_to_this_process(tmp_path, monkeypatch):
    pkg = _tree(tmp_path)
    expected = _scan(pkg, 1).to_json()
    monkeypatch.setattr(forked, "_work", lambda conn, share: os._exit(3))
    assert _scan(pkg, 2).to_json() == expected


def test_a_worker_that_dies_while_analysing_leaves_the_scan_to_this_process(tmp_path, monkeypatch):
    """By then the parent is passing indexes and outlines between the workers: nothing may hang."""
    pkg = _tree(tmp_path)
    expected = _scan(pkg, 1).to_json()
    parent, add = os.getpid(), ChunkAnalysis.add

    def dying(self, pos):
        if os.getpid() != parent:
            os._exit(3)
        return add(self, pos)

    monkeypatch.setattr(ChunkAnalysis, "add", dying)
    assert _scan(pkg, 2).to_json() == expected


def test_a_worker_error_is_raised_not_swallowed(tmp_path, monkeypatch):
    pkg = _tree(tmp_path)

    def broken(*args):
        raise LookupError("triage broke")

    monkeypatch.setattr(forked, "triage", broken)
    with pytest.raises(LookupError, match="triage broke"):
        _scan(pkg, 2)


def test_a_worker_error_that_cannot_be_pickled_comes_back_as_its_traceback(tmp_path, monkeypatch):
    pkg = _tree(tmp_path)

    class Unpicklable(Exception):  # a local class: pickle cannot name it
        pass

    def broken(*args):
        raise Unpicklable("triage broke oddly")

    monkeypatch.setattr(forked, "triage", broken)
    with pytest.raises(RuntimeError, match="Unpicklable: triage broke oddly"):
        _scan(pkg, 2)


def test_shares_cover_every_file_once_in_order_and_interleaved():
    positions = [0, 2, 3, 5, 7, 8, 9, 12, 13]
    shares = forked._shares(positions, 2)
    assert sorted(p for s in shares for p in s) == positions
    assert all(s == sorted(s) for s in shares)
    assert [len(s) for s in shares] == [5, 4]
    assert shares[0][:2] == [0, 3]  # every other file: each folder's files go to both workers
    assert forked._shares([3], 4) == [[3]]


def _six_modules():
    """A stand-in tree of files m0.py ... m5.py (the hand-out reads their relpaths only)."""
    class File:
        def __init__(self, relpath):
            self.relpath = relpath

    class Tree:
        files = [File(f"m{i}.py") for i in range(6)]

    return Tree()


def test_handout_gives_each_candidate_once_preferring_what_a_worker_parsed_already():
    handout = forked._Handout(_six_modules(), 2)
    handout.add([(pos, 10 * pos) for pos in range(6)])  # (position, size): m5 the largest
    assert handout.take(0) == 5  # nothing parsed anywhere: the largest
    handout.parsed[0].add("m2.py")  # worker 0 parsed m2 as a helper
    handout.parsed[1].add("m4.py")
    assert handout.take(0) == 2  # its own before a larger one
    assert handout.take(0) == 3  # m4 is worker 1's: the largest nobody else parsed
    assert handout.take(1) == 4
    assert handout.take(0) == 1
    handout.parsed[1].add("m0.py")
    assert handout.take(0) == 0  # only a module the other parsed is left: it is handed out all the same
    assert handout.take(0) is None and handout.take(1) is None


def test_handout_takes_in_each_triage_as_it_comes():
    """Candidates are handed out while another worker's triage is still running: what arrives later
    joins the rest by size (largest first), and nothing is handed out twice."""
    handout = forked._Handout(_six_modules(), 2)
    assert handout.take(0) is None  # nothing found yet
    handout.add([(1, 10), (3, 30)])  # the first worker's triage
    assert handout.take(0) == 3
    handout.add([(2, 20), (4, 40), (0, 20)])  # the second's: m4 is now the largest left
    assert [handout.take(1), handout.take(0), handout.take(1), handout.take(0)] == [4, 0, 2, 1]
    assert handout.take(0) is None


def test_name_index_holds_every_file_that_calls_or_defines_a_name():
    texts = {
        0: b"class A:\n    def gr\xc3\xb6\xc3\x9fe (self):\n        return 1\n",
        6: b"print(obj.gr\xc3\xb6\xc3\x9fe(1))\n",
        1: b"x.helper(1)\ny.helper_two(2)\n",
        2: b"async  def   helper(\n  self): pass\n",
        3: b"helper = 1  # names it, neither calls nor defines it\n",
        4: b"obj . helper(1)\nundef_helper(1)\n",
        5: b"self.a.b.helper(x)\n",
    }
    index = names.NameIndex([names.index_part([(p, texts[p]) for p in (0, 1, 2, 6)])], [3, 4, 5], texts.get)
    assert index.files("helper") == [1, 2, 5]  # `obj . helper(` with spaces is no `.helper(` call
    assert index.files("größe") == [0, 6]
    assert index.files("helper_two") == [1]
    assert index.files("missing") == []


def _echo(conn, times: int) -> None:
    for _ in range(times):
        conn.send(conn.recv())


def test_a_channel_carries_messages_larger_than_a_pipe_both_ways_and_ends_with_eof():
    """analysis/channel.py: a message of several MB crosses whole (written and read in parts), and a
    worker that has returned leaves an EOFError, not a hang."""
    from ddcheck.analysis import channel

    if not channel.can_fork():
        pytest.skip("no fork here")
    worker = channel.Worker(_echo, (2,))
    try:
        big = {"index": [os.urandom(1 << 16) for _ in range(80)]}  # ~5 MB
        for message in (big, ("small", 1)):
            worker.channel.send(message)
            assert worker.channel.recv() == message
        with pytest.raises(EOFError):
            worker.channel.recv()
    finally:
        worker.channel.close()
        worker.join()


def test_tree_lookups_find_every_name_ending_with_a_suffix_in_order():
    """target/modules.TreeIndex._ending_with answers, from the names grouped by their last part, what asking
    each name answers, remembered lookups and a name holding a newline included."""
    from ddcheck.tree.modules import TreeIndex

    class Tree:
        kind, root, files = "dir", None, []

    index = TreeIndex(Tree())
    index.by_module.update({"python.sglang.srt.x": 1, "sglang.srt.x": 2, "srt.xx": 3, "x": 4, "a.srt.x": 5})
    expected = [m for m in index.by_module if m.endswith(".srt.x")]
    assert index._ending_with(".srt.x") == expected == ["python.sglang.srt.x", "sglang.srt.x", "a.srt.x"]
    assert index.lookup("srt.x") == 5  # the shortest name that matches: a.srt.x
    index.by_module["odd\nname.srt.x"] = 6
    assert index._ending_with(".srt.x") == [m for m in index.by_module if m.endswith(".srt.x")]


def test_a_fork_refused_leaves_the_scan_to_this_process_and_no_pipe_open(tmp_path, monkeypatch):
    pkg = _tree(tmp_path)
    expected = _scan(pkg, 1).to_json()
    def open_fds() -> int | None:
        return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None

    def refused():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    before = open_fds()
    monkeypatch.setattr(os, "fork", refused)
    assert _scan(pkg, 2).to_json() == expected
    assert open_fds() == before  # the pipes made for the worker are closed again
