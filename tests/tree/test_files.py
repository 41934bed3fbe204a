"""Atomic writes written once (ddcheck/tree/files.py): the result cache, the rule definitions, the flag
tables and the fixed sources all write through ddcheck.tree.files.replace."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

from ddcheck.tree import files

REPO = Path(__file__).resolve().parents[2]


def test_replace_writes_whole_and_leaves_no_temporary_file(tmp_path):
    p = tmp_path / "a.json"
    p.write_text("old")
    files.replace(p, b"new", mode=0o640, durable=True)
    assert p.read_bytes() == b"new" and (p.stat().st_mode & 0o777) == 0o640
    assert [q.name for q in tmp_path.iterdir()] == ["a.json"]


def test_an_abandoned_replace_keeps_the_old_file_and_no_temporary_one(tmp_path):
    p = tmp_path / "a.py"
    p.write_text("x = 1\n")

    def refuse():
        raise RuntimeError("changed meanwhile")

    with pytest.raises(RuntimeError):
        files.replace(p, b"x = 2\n", before_rename=refuse)
    assert p.read_text() == "x = 1\n" and [q.name for q in tmp_path.iterdir()] == ["a.py"]


def test_replace_takes_another_name_where_a_stale_temporary_file_is_in_the_way(tmp_path, monkeypatch):
    p = tmp_path / "a.json"
    monkeypatch.setattr(files, "_SERIAL", iter([0, 1]))
    stale = tmp_path / f".a.json.{os.getpid()}.0{files.TMP_SUFFIX}"
    stale.write_text("left by a dead process")
    files.replace(p, b"{}")
    assert p.read_bytes() == b"{}" and stale.read_text() == "left by a dead process"


def test_write_json_prunes_to_the_newest_and_reports_what_it_could_not_write(tmp_path):
    for i in range(4):
        assert files.write_json(tmp_path / "c" / f"{i}.json", {"i": i}, keep=2)
        os.utime(tmp_path / "c" / f"{i}.json", (i, i))
    files.write_json(tmp_path / "c" / "4.json", [4], keep=2)
    assert sorted(q.name for q in (tmp_path / "c").iterdir()) == ["3.json", "4.json"]
    assert json.loads((tmp_path / "c" / "4.json").read_text()) == [4]
    assert files.write_json(tmp_path / "c" / "5.json", {1, 2}) is False  # not JSON: nothing written
    assert not (tmp_path / "c" / "5.json").exists()
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert files.write_json(blocker / "x.json", 1) is False  # its folder cannot be made


@pytest.mark.parametrize("module", ["ddcheck/scan/cache.py", "ddcheck/rules/__init__.py", "ddcheck/config/flags.py",
                                    "ddcheck/fix/runner.py"])
def test_the_writers_of_issue_33_rename_nothing_themselves(module):
    """The three copies of 'temporary file, then rename' (cache._write, launch/flags, fixing/runner)
    are calls of ddcheck.tree.files now: no rename, no tempfile of their own."""
    tree = ast.parse((REPO / module).read_text(encoding="utf-8"))
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert not {c for c in calls if c in ("os.replace", "os.rename") or c.endswith((".replace", ".rename"))
                and "tmp" in c}
    assert not any(isinstance(n, (ast.Import, ast.ImportFrom)) and "tempfile" in ast.unparse(n) for n in ast.walk(tree))
