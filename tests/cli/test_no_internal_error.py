"""No input ends in "internal error" (issue #32): each case is built from the input that broke it; the
run goes on over the other files, the message names the file or setting, the exit code is the README's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddcheck.scan.api import scan
from ddcheck.fix.api import fix_targets
from ddcheck.scan.settings import Settings

REPO = Path(__file__).resolve().parents[2]
GUARDS = (REPO / "fixtures" / "analysis" / "guards.py").read_text()
C = "self.num_draft_tokens"
HEAD = ("class B:\n    def __init__(self, mr):\n        self.num_draft_tokens = mr.server_args.speculative_num_draft_tokens\n\n"
        "    def init_forward_metadata(self, forward_batch):\n"
        "        if forward_batch.forward_mode.is_target_verify():\n")


def ddcheck(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "400", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "ddcheck", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)


def clean(out: subprocess.CompletedProcess) -> None:
    assert "internal error" not in out.stderr + out.stdout and "Traceback" not in out.stderr, out.stderr


# -- deep nesting ---------------------------------------------------------------------------------


@pytest.mark.parametrize("expr", [" + ".join([C] * 400), C + "[0]" * 400 + f" + {C}"], ids=["sum", "subscripts"])
def test_a_verify_branch_nested_400_deep_is_analysed_and_fixed(tmp_path, expr):
    (tmp_path / "guards.py").write_text(GUARDS)
    (tmp_path / "deep.py").write_text(HEAD + f"            x = forward_batch.seq_lens + {expr}\n")
    result = scan([str(tmp_path)], settings=Settings(), use_cache=False)
    assert result.errors == []
    assert {Path(f.path).name for f in result.findings} == {"guards.py", "deep.py"}
    assert fix_targets([str(tmp_path)])  # fixed, both files
    fixed = (tmp_path / "deep.py").read_text()
    compile(fixed, "deep.py", "exec")
    assert "spec_info" in fixed


def test_nesting_python_refuses_is_a_parse_error_of_that_file_only(tmp_path):
    (tmp_path / "guards.py").write_text(GUARDS)
    (tmp_path / "deep.py").write_text(HEAD + "            x = " + "-" * 4000 + C + "\n")
    with pytest.raises((RecursionError, SyntaxError, MemoryError)):
        compile((tmp_path / "deep.py").read_text(), "deep.py", "exec")
    result = scan([str(tmp_path)], settings=Settings(), use_cache=False)
    assert [(Path(e.path).name, "too deeply nested" in e.message) for e in result.errors] == [("deep.py", True)]
    assert any(Path(f.path).name == "guards.py" for f in result.findings)


# -- encodings ------------------------------------------------------------------------------------


def test_a_codec_that_is_no_text_encoding_is_that_files_error(tmp_path):
    (tmp_path / "guards.py").write_text(GUARDS)
    (tmp_path / "rot.py").write_bytes(b"# coding: rot13\nx = 1\n")
    result = scan([str(tmp_path)], settings=Settings(), use_cache=False)
    assert [(Path(e.path).name, e.message) for e in result.errors] == [
        ("rot.py", "cannot be decoded: the declared encoding 'rot13' is not a text encoding")]
    assert result.findings
    out = ddcheck("fix", str(tmp_path))
    clean(out)
    assert out.returncode == 1 and "rot.py" in out.stdout + out.stderr
    assert "or self.num_draft_tokens" in (tmp_path / "guards.py").read_text()  # the others were fixed


# -- settings and inputs of the wrong shape -------------------------------------------------------


@pytest.mark.parametrize("toml, says", [('[tool]\nddcheck = "x"\n', "tool.ddcheck: not a table"),
                                        ('tool = "ddcheck"\n', "tool: not a table")])
def test_pyproject_tables_of_the_wrong_type_are_usage_errors(tmp_path, toml, says):
    (tmp_path / "pyproject.toml").write_text(toml)
    (tmp_path / "guards.py").write_text(GUARDS)
    out = ddcheck("scan", "--no-cache", ".", cwd=tmp_path)
    clean(out)
    assert out.returncode == 2 and says in out.stderr and "pyproject.toml" in out.stderr


@pytest.mark.parametrize("count", ["Infinity", "1e400", "-1", "1.5", '"2"', "true"])
def test_a_baseline_count_that_is_no_whole_number_is_a_usage_error(tmp_path, count):
    from ddcheck.diagnostics.baseline import BaselineError, load

    b = tmp_path / "b.json"
    b.write_text('{"version": 1, "tool": "ddcheck", "findings": [{"fingerprint": "a", "count": %s}]}' % count)
    with pytest.raises(BaselineError, match="not a ddcheck baseline.*count"):
        load(b)
    (tmp_path / "guards.py").write_text(GUARDS)
    out = ddcheck("scan", "--no-cache", "--baseline", str(b), str(tmp_path / "guards.py"))
    clean(out)
    assert out.returncode == 2 and "b.json" in out.stderr


def test_a_baseline_nested_1000_deep_is_a_usage_error(tmp_path):
    from ddcheck.diagnostics.baseline import BaselineError, load

    b = tmp_path / "b.json"
    b.write_text('{"version": 1, "findings": ' + "[" * 1000 + "]" * 1000 + "}")
    with pytest.raises(BaselineError, match="nested too deeply"):
        load(b)


def test_write_baseline_into_a_missing_folder_is_a_usage_error(tmp_path):
    (tmp_path / "guards.py").write_text(GUARDS)
    out = ddcheck("scan", "--no-cache", "--write-baseline", str(tmp_path / "nodir" / "b.json"), str(tmp_path))
    clean(out)
    assert out.returncode == 2 and "nodir/b.json: cannot write the baseline" in out.stderr


@pytest.mark.parametrize("text, says", [("a: " + "9" * 5000 + "\n", "holds a value that cannot be read"),
                                        ("a: " + "[" * 1000 + "]" * 1000 + "\n", "nested too deeply")])
def test_config_yaml_that_python_cannot_hold_is_a_parse_error(tmp_path, text, says):
    from ddcheck.config.flags import ParseError, merge_config_file

    y = tmp_path / "launch.yaml"
    y.write_text(text)
    with pytest.raises(ParseError, match=says) as err:
        merge_config_file(type("Table", (), {"flags": []})(), ["--config", str(y)])
    assert str(y) in str(err.value)


def test_config_of_a_tree_whose_server_args_does_not_parse_is_a_usage_error(tmp_path):
    import shutil

    tree = tmp_path / "tree"
    shutil.copytree(REPO / "fixtures" / "trees" / "newer_ddtree", tree)
    server_args = next(tree.rglob("server_args.py"))
    server_args.write_text(server_args.read_text() + "\ndef (\n")
    out = ddcheck("config", "--sglang", str(tree), "--", "python", "-m", "sglang.launch_server", "--model-path", "m")
    clean(out)
    assert out.returncode == 2 and "server_args.py: does not parse" in out.stderr


# -- every fixture of the suite -------------------------------------------------------------------


def test_no_fixture_meets_an_internal_error(capsys, monkeypatch):
    """Every file and folder under fixtures/ scanned on its own: none ends in an internal error (the
    CLI's last line of defence is kept for real bugs)."""
    from ddcheck.cli.app import main  # the typer entry: it exits through SystemExit, the fast one ends the process

    paths = sorted(p for p in (REPO / "fixtures").rglob("*") if "__pycache__" not in p.parts)
    for path in [REPO / "fixtures", *paths]:
        sys_argv = sys.argv
        sys.argv = ["ddcheck", "scan", "--no-cache", "--format", "json", str(path)]
        try:
            with pytest.raises(SystemExit) as done:
                main()
        finally:
            sys.argv = sys_argv
        out = capsys.readouterr()
        assert "internal error" not in out.err + out.out, f"{path}: {out.err}"
        if path.is_dir() and not any(path.rglob("*.py")):  # a named folder with nothing to check: usage, 2
            assert done.value.code == 2 and "no Python files" in out.err, f"{path}: exit {done.value.code}"
            continue
        assert done.value.code in (0, 1), f"{path}: exit {done.value.code}: {out.err}"
        if path.suffix == ".py":
            json.loads(out.out)


# -- quieter ones ---------------------------------------------------------------------------------


def test_fix_refuses_a_read_only_file_and_reports_it(tmp_path):
    ro, rw = tmp_path / "ro.py", tmp_path / "rw.py"
    for p in (ro, rw):
        p.write_text(GUARDS)
    ro.chmod(0o444)
    try:
        out = ddcheck("fix", str(tmp_path))
        clean(out)
        assert out.returncode == 1
        assert "ro.py: not written" in out.stderr and "read-only file (mode 0444)" in out.stderr
        assert ro.read_text() == GUARDS and (ro.stat().st_mode & 0o777) == 0o444  # untouched, mode kept
        assert rw.read_text() != GUARDS  # the run went on
    finally:
        ro.chmod(0o644)


def test_control_characters_in_file_names_are_escaped(tmp_path):
    (tmp_path / "a\x1b[31mred\x07.py").write_text(GUARDS)
    (tmp_path / "bad\nname.py").write_bytes(b"# coding: rot13\n")
    out = ddcheck("scan", "--no-cache", str(tmp_path))
    clean(out)
    assert out.returncode == 1
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout and "bad\nname" not in out.stdout
    assert "a\\x1b[31mred\\x07.py:" in out.stdout and "bad\\nname.py: cannot scan" in out.stdout
    fix = ddcheck("fix", str(tmp_path))
    assert "\x1b" not in fix.stdout + fix.stderr and "a\\x1b[31mred\\x07.py" in fix.stdout
    assert "or self.num_draft_tokens" in (tmp_path / "a\x1b[31mred\x07.py").read_text()  # written to the real name
