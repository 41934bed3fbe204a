"""Every input mistake is one line on stderr and exit 2, naming the valid choices or what was meant,
with nothing printed before it; a smoke run whose environment cannot run it (torch missing, numpy past
the break of Triton's interpreter) is one line naming what to install and exit 3 (not judged). The real
console script runs each, as a user would type it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddcheck.base.errors import EXIT_NOT_JUDGED, EXIT_USAGE

REPO = Path(__file__).resolve().parents[2]
DEMO = str(REPO / "fixtures" / "demo")


def ddcheck(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ddcheck", *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "80", **(env or {})}, cwd=REPO, timeout=300)


def one_line(run: subprocess.CompletedProcess, code: int = EXIT_USAGE) -> str:
    """The run's one line of stderr, after checking it printed nothing else and exited with ``code``."""
    assert (run.returncode, run.stdout) == (code, ""), run.stdout + run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    return lines[0]


def test_misspelt_backend_is_one_line_with_did_you_mean():
    """It used to print the report's header, naming triton_backend.py, and an empty table first."""
    line = one_line(ddcheck("smoke", DEMO, "--backend", "flashatention"))
    assert "unknown backend 'flashatention'; did you mean 'fa3'?" in line
    assert "known: triton, fa3," in line


def test_unknown_backend_names_the_known_ones():
    line = one_line(ddcheck("smoke", DEMO, "--backend", "xyz"))
    assert "did you mean" not in line and "known: triton, fa3, trtllm_mha, flashinfer" in line


def test_backend_names_are_case_insensitive():
    """``FA3`` is fa3: the run goes on (to the demo, which is no sglang tree) as fa3's."""
    run = ddcheck("smoke", DEMO, "--backend", "FA3", "--format", "json")
    report = json.loads(run.stdout)
    assert report["attention_backend"] == "fa3"
    assert report["backend"].endswith("flashattention_backend.py")
    assert "unknown backend" not in report["verdict"]


def test_unknown_device_is_one_line_not_torchs_list():
    """It used to reach torch, whose error lists some twenty device types."""
    line = one_line(ddcheck("smoke", DEMO, "--device", "gpu"))
    assert line == "ddcheck: --device: unknown device 'gpu': cpu (Triton's interpreter), cuda or cuda:N"


def test_config_smoke_checks_its_device_too():
    line = one_line(ddcheck("config", "--smoke", "--device", "gpu", "--", "python", "-m", "x"))
    assert "unknown device 'gpu'" in line


def test_fix_names_a_missing_path_once(tmp_path):
    missing = str(tmp_path / "x")
    line = one_line(ddcheck("fix", missing))
    assert line == f"ddcheck: {missing}: no such file or directory"


@pytest.mark.parametrize("argv, line", [
    (["scna"], "ddcheck: No such command 'scna'. Did you mean 'scan'?"),
    (["smoke", "--bakend", "triton", DEMO],
     "ddcheck: smoke: No such option: --bakend (Possible options: --backend, --backend-file, --list-backends)"),
    (["scan", "--fail-on", "bad", DEMO], "ddcheck: scan: Invalid value for '--fail-on': "),
], ids=["command", "option", "value"])
def test_what_the_command_line_parser_refuses_is_one_line_too(argv, line):
    """Unknown commands and options, values of the wrong kind: once a usage line, a hint and a blank line
    came before the error; now the error alone, with the parser's own suggestions."""
    assert one_line(ddcheck(*argv)).startswith(line)


# ------------------------------------------------------------- what the environment lacks: one line, exit 3


def _dist(site: Path, name: str, version: str) -> None:
    """A distribution's metadata as pip writes it: what importlib.metadata reads first on the path."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")


def test_numpy_past_the_interpreter_break_is_named(tmp_path):
    """numpy 2.4 breaks scalar loads in the interpreter of triton 3.6 (docs/smoke.md); a numpy 2.4 found
    first on the path is named, with what to install, before anything runs; with triton 3.8 it is none."""
    _dist(tmp_path, "numpy", "2.4.1")
    _dist(tmp_path, "triton", "3.6.0")
    run = ddcheck("smoke", DEMO, env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"})
    line = one_line(run, EXIT_NOT_JUDGED)
    assert "numpy 2.4.1 breaks the interpreter of triton 3.6.0" in line and "pip install 'numpy<2.4'" in line
    triton38 = tmp_path / "later"
    _dist(triton38, "numpy", "2.4.1")
    _dist(triton38, "triton", "3.8.0")
    check = "from ddcheck.smoke.requirements import problem; print(problem('cpu'))"
    assert subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": f"{triton38}{os.pathsep}{REPO}"}).stdout == "None\n"


def test_unsupported_torch_is_named_with_the_range(tmp_path):
    _dist(tmp_path, "torch", "2.7.1")
    line = one_line(ddcheck("smoke", DEMO, env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}), EXIT_NOT_JUDGED)
    assert "torch 2.7.1 is not a version ddcheck smoke supports (torch>=2.8,<2.15)" in line
    assert "pip install 'ddcheck[smoke]'" in line


def test_smoke_names_a_missing_path_before_looking_at_torch(tmp_path):
    """The cheap check first (issue 49): a path that is not there is said at once, not after torch is
    looked at (seconds to import; here a torch smoke does not support, which would be exit 3)."""
    _dist(tmp_path / "site", "torch", "2.7.1")
    missing = str(tmp_path / "no-such")
    line = one_line(ddcheck("smoke", missing, env={"PYTHONPATH": f"{tmp_path / 'site'}{os.pathsep}{REPO}"}))
    assert line == f"ddcheck: {missing}: no such file or directory"


@pytest.fixture
def without_torch(tmp_path) -> list[str]:
    """This environment's site-packages without torch: a folder of links to everything else, put on
    the path of an interpreter that reads no site-packages of its own (-S)."""
    import site

    shadow = tmp_path / "site"
    shadow.mkdir()
    for root in map(Path, site.getsitepackages()):
        for entry in root.iterdir():
            if not entry.name.lower().startswith("torch") and not (shadow / entry.name).exists():
                (shadow / entry.name).symlink_to(entry)
    return [sys.executable, "-S", "-c", f"import sys; sys.path[:0] = [{str(REPO)!r}, {str(shadow)!r}]; "
                                        f"import runpy; sys.argv[0] = 'ddcheck'; runpy.run_module('ddcheck', "
                                        f"run_name='__main__')"]


def test_missing_torch_names_the_extra(without_torch):
    run = subprocess.run([*without_torch, "smoke", DEMO], capture_output=True, text=True, cwd=REPO, timeout=300)
    line = one_line(run, EXIT_NOT_JUDGED)
    assert line.startswith("ddcheck: torch is not installed") and "pip install 'ddcheck[smoke]'" in line


def test_list_backends_says_none_runs_without_torch(without_torch):
    """It used to say triton and fa3 "run" where torch was missing."""
    run = subprocess.run([*without_torch, "smoke", "--list-backends"], capture_output=True, text=True, cwd=REPO,
                         timeout=300)
    assert run.returncode == 0
    triton = next(ln for ln in run.stdout.splitlines() if ln.startswith("triton "))
    assert "does not run here: torch is not installed" in triton
