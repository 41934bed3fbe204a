"""Golden output: what users read is pinned, so a change to a message, a hint, a column or the
layout of the text/JSON reports shows up as a diff in review. Regenerate deliberately with
``DDCHECK_UPDATE_GOLDEN=1 python -m pytest tests/scan/test_golden.py`` and read the diff."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddcheck.rules import all_rules

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden"
UPDATE = os.environ.get("DDCHECK_UPDATE_GOLDEN") == "1"
RULES = sorted(r.id for r in all_rules().values() if r.face == "scan")  # config rules: tests/config/test_config_rules.py


def check(name: str, got: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(got, encoding="utf-8")
    assert path.is_file(), f"no golden file {name}: run with DDCHECK_UPDATE_GOLDEN=1 and review it"
    assert got == path.read_text(encoding="utf-8")


def cli(*args: str) -> str:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    r = subprocess.run([sys.executable, "-m", "ddcheck", *args], capture_output=True, text=True, cwd=REPO, env=env,
                       timeout=120)
    assert r.returncode in (0, 1), r.stderr
    return r.stdout


@pytest.mark.parametrize("rule_id", RULES)
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_rule_example_reports(rule_id, fmt):
    out = cli("scan", f"rules/{rule_id}/bad.py", "--no-cache", "--format", fmt)
    check(f"{rule_id}.{'txt' if fmt == 'text' else 'json'}", out)


def test_analysis_fixture_with_start_up_buffers():
    """fixtures/analysis/buffers.py: buffers laid out with C at start-up and read on the verify path
    (their findings carry the refill fix: offsets rebuilt stepping by W, a C-filled buffer filled with W)."""
    out = cli("scan", "fixtures/analysis/buffers.py", "--no-cache", "--format", "text")
    assert "Refill `self.verify_meta[\"cu_seqlens_q\"]` in place, offsets stepping by" in out
    assert "Refill `self.extend_lens` in place, every entry set to" in out
    check("fixtures-buffers.txt", out)


@pytest.mark.network
def test_a_real_release_file(release_scan):
    """sglang 0.5.10's triton backend, every finding as a user sees it (rule, place, message, hint, fix)."""
    rows = [{"where": f"{f.relpath}:{f.line}:{f.column + 1}-{f.end_line}:{f.end_column + 1}", "rule": f.rule,
             "severity": f.severity.value, "symbol": f.symbol, "message": f.message, "hint": f.hint,
             "fix": f.fix_safety}
            for f in release_scan("0.5.10").findings if f.relpath.endswith("layers/attention/triton_backend.py")]
    check("sglang-0.5.10-triton_backend.json", json.dumps(rows, indent=1, ensure_ascii=False) + "\n")
