"""ddcheck installs next to SGLang: the ``[smoke]`` extra states ranges, the same ones ``ddcheck smoke``
checks at run time (ddcheck/smoke/requirements.py), so ``pip install 'ddcheck[smoke]'`` in SGLang's
environment keeps the torch and triton SGLang brought; the ``[test]`` extra keeps giving CI the build
it always had (`.ci/run`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ddcheck.smoke import requirements

REPO = Path(__file__).resolve().parents[2]
EXTRAS = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]


def _bound(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def test_the_smoke_extra_states_the_ranges_smoke_checks():
    wanted = {f"{m}>={_bound(lo)},<{_bound(hi)}" for m, (lo, hi) in requirements.SUPPORTED.items()}
    wanted.add(f"numpy<{_bound(requirements.NUMPY_INTERPRETER_BREAK)}")
    assert wanted <= set(EXTRAS["smoke"])
    assert not [r for r in EXTRAS["smoke"] if "==" in r]  # no one build


def _dry_run(python: Path, *requirements_: str) -> dict[str, str]:
    """What ``pip install --dry-run`` would install into ``python``'s environment: name -> version."""
    report = python.parent.parent / "report.json"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--dry-run", "--quiet",
                    "--report", str(report), *requirements_],
                   check=True, cwd=REPO, capture_output=True, timeout=600,
                   env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    out = json.loads(report.read_text(encoding="utf-8"))
    return {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in out["install"]}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """ddcheck's wheel, built once from a clean copy of the repository (no build/ or egg-info left by
    an earlier build): what the tests below install or read, as ``pip install .`` would build it."""
    import shutil

    tmp = tmp_path_factory.mktemp("built")
    src = tmp / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".git", ".venv", ".carry", "build", "*.egg-info",
                                                             "__pycache__", ".pytest_cache"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp / "out"), str(src)], check=True, capture_output=True, timeout=300)
    return next((tmp / "out").glob("ddcheck-*.whl"))


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.xdist_group("install")  # one worker builds the wheel both tests read
def test_the_smoke_extra_keeps_sglangs_torch(tmp_path, built):
    """A venv with the torch and triton of a serving machine (the H200's 2.11.0+cu130 and triton 3.6.0, the
    build sglang 0.5.12-0.5.16 pin: metadata as pip records an installed distribution, which is all its
    resolver reads): ``.[smoke]`` replaces neither; a pinned torch would (the old extra's torch==2.13.0).
    (``.[test]`` into a fresh venv is `.ci/run` itself: the suite runs on the torch it resolves.)"""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    python = tmp_path / "venv" / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    for name, version in (("torch", "2.11.0+cu130"), ("triton", "3.6.0")):
        info = site / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
        (info / "INSTALLER").write_text("pip\n", encoding="utf-8")
        (info / "RECORD").write_text("", encoding="utf-8")

    smoke = _dry_run(python, f"{built}[smoke]")
    assert "ddcheck" in smoke and "msgspec" in smoke
    assert "torch" not in smoke and "triton" not in smoke, smoke
    assert _dry_run(python, f"{built}[smoke]", "torch==2.13.0").get("torch", "").startswith("2.13.0")  # the check can fail


@pytest.mark.xdist_group("install")
def test_the_wheel_ships_the_rules_and_the_demo_not_the_test_fixtures(built):
    """The bundled demo (what `ddcheck scan` reads with no sglang) and every rule's folder (`ddcheck
    explain`) ship; the repository's test fixtures do not."""
    import zipfile

    names = zipfile.ZipFile(built).namelist()
    fixtures = sorted(n for n in names if n.startswith("ddcheck/_fixtures/"))
    assert fixtures == ["ddcheck/_fixtures/__init__.py", "ddcheck/_fixtures/demo/README.md",
                        "ddcheck/_fixtures/demo/toy_fixed_backend.py", "ddcheck/_fixtures/demo/toy_triton_backend.py"]
    rules = {n.split("/")[2] for n in names if n.startswith("ddcheck/_rules/") and n.count("/") > 2}
    assert {"DD001", "DD002", "DD003"} <= rules
