"""The suite itself: how tests/conftest.py and pyproject's addopts hand tests to the two workers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_an_xdist_group_stays_on_one_worker(tmp_path):
    """The suite's conftest with pyproject's addopts: tests marked with one ``xdist_group`` run on one
    worker (a file's smoke servers and the audit's fixture are made once, not once per worker)."""
    import shutil

    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "test_groups.py").write_text(
        "import os, pytest\n"
        + "".join(f"@pytest.mark.xdist_group('g')\ndef test_g{i}():\n    print('W', os.environ['PYTEST_XDIST_WORKER'])\n"
                  f"def test_free{i}():\n    pass\n" for i in range(6)))
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "test_groups.py"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    workers = {line.split()[0] for line in r.stdout.splitlines() if "::test_g" in line and "PASSED" in line}
    assert len(workers) == 1, r.stdout
