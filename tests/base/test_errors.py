"""One errors module: one UsageError, the exit codes (ddcheck/base/errors.py)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import ddcheck.base.errors as errors

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "ddcheck"


def test_usage_error_is_defined_once():
    """No module but ddcheck/base/errors.py defines an exception named UsageError (two existed: a command
    raising the one ``main`` did not catch reported a usage error as an internal error)."""
    found = [f"{p.relative_to(REPO)}:{n.lineno}" for p in sorted(PACKAGE.rglob("*.py"))
             for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
             if isinstance(n, ast.ClassDef) and n.name == "UsageError"]
    assert found == ["ddcheck/base/errors.py:" + str(_line_of_class(PACKAGE / "base" / "errors.py", "UsageError"))]


def _line_of_class(path: Path, name: str) -> int:
    return next(n.lineno for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef) and n.name == name)


def test_commands_raise_and_catch_the_same_usage_error():
    from ddcheck.cli import scan as scan_command
    from ddcheck.config import api as launch_api

    assert scan_command.UsageError is errors.UsageError
    assert launch_api.UsageError is errors.UsageError
    assert (errors.EXIT_CLEAN, errors.EXIT_FINDINGS, errors.EXIT_USAGE) == (0, 1, 2)


def test_smoke_launch_without_widths_is_a_usage_error_not_an_internal_one():
    """``ddcheck smoke TREE --launch "--model-path m"``: the launch names no speculative algorithm, so W
    and C are unknown; cli._launch_widths raises a UsageError, which must reach the user as one."""
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    out = subprocess.run([sys.executable, "-m", "ddcheck", "smoke", str(REPO / "fixtures" / "trees" / "newer_ddtree"),
                          "--launch", "--model-path m"], capture_output=True, text=True, env=env, cwd=REPO)
    assert out.returncode == errors.EXIT_USAGE, out.stderr
    assert "--launch" in out.stderr
    assert "internal error" not in out.stderr and "Traceback" not in out.stderr


def test_config_usage_error_exits_2_with_its_message(capsys):
    import sys

    import pytest

    from ddcheck.cli.app import main

    argv = sys.argv
    sys.argv = ["ddcheck", "config", "--sglang", "/nonexistent/sglang", "--", "--model-path", "m"]
    try:
        with pytest.raises(SystemExit) as exited:
            main()
    finally:
        sys.argv = argv
    assert exited.value.code == errors.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("ddcheck: ") and "internal error" not in err
