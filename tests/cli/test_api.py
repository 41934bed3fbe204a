"""The Python API (README): ``ddcheck.scan`` and ``ddcheck.fix`` are functions though ``scan/`` and
``fix/`` are the commands' packages; importing the packages' modules leaves the names to the functions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_api_names_stay_the_functions_after_their_packages_modules_load(tmp_path):
    (tmp_path / "backend.py").write_text("x = 1\n")
    code = (
        "import ddcheck, ddcheck.scan.api, ddcheck.fix.runner, ddcheck.config.api\n"
        "from ddcheck import Severity, ScanResult\n"
        f"r = ddcheck.scan([{str(tmp_path / 'backend.py')!r}])\n"
        "assert isinstance(r, ScanResult) and r.files_scanned == 1 and r.at_or_above(Severity.error) == []\n"
        f"assert ddcheck.fix([{str(tmp_path / 'backend.py')!r}]) == []\n"
        "assert callable(ddcheck.check_launch)\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                         env={"PYTHONPATH": str(REPO), "DDCHECK_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
