"""`ddcheck config --smoke` is composed above both commands (ddcheck/config/smoke.py): the CLI hands
check_launch the smoke run; ddcheck.config imports nothing of ddcheck.smoke."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TREE = REPO / "fixtures" / "trees" / "newer_ddtree"
LAUNCH = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--speculative-algorithm", "DDTREE",
          "--speculative-ddtree-budget", "3", "--speculative-num-draft-tokens", "16", "--attention-backend", "torch_native",
          "--speculative-ddtree-pad"]  # every step verifies budget + 1: W = 4 from the fixture's worker


def _config(*flags: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "ddcheck", "config", *flags, "--format", "json", "--sglang", str(TREE),
                          "--", *LAUNCH], capture_output=True, text=True, cwd=REPO)
    assert out.returncode in (0, 1, 3) and json.loads(out.stdout)["exit_code"] == out.returncode, out.stderr
    return json.loads(out.stdout)


def test_config_smoke_reports_the_run_and_plain_config_does_not():
    """smoke does not run torch_native: the asked-for smoke could not run, so the launch is not judged
    (exit 3, unless errors win), and the report says what would make it judgeable."""
    smoked = _config("--smoke")
    assert not [f for f in smoked["findings"] if f["rule"] == "DD250"]  # not run: not judged, not a finding
    assert any("does not run torch_native" in n for n in smoked["not_judged"])
    assert [n.split(":")[0] for n in smoked["not_judged"] if n.startswith("launch-smoke")] == ["launch-smoke"]
    assert smoked["exit_code"] == (1 if any(f["severity"] == "error" for f in smoked["findings"]) else 3)
    plain = _config()
    assert not [f for f in plain["findings"] if f["rule"] == "DD250"] and plain["not_judged"] == []


def test_check_launch_runs_the_smoke_it_is_given():
    from ddcheck.config import check_launch
    from ddcheck.rules import LaunchRule, all_rules
    from ddcheck.tree.sources import open_target

    seen = []

    def smoke(s, tree):
        seen.append((s.verify_width, s.num_draft_tokens, tree.label))
        return [LaunchRule(all_rules()["DD250"]).finding("right", backend="x", C=0, W=0, inputs="", verdict="ran")]

    report = check_launch(LAUNCH, tree=open_target(str(TREE)), smoke=smoke)
    assert seen and seen[0][:2] == (4, 16)
    assert [f.message for f in report.findings if f.rule == "DD250"] == \
        ["the tree's x verify path at C=0, W=0 () is right on every path run: ran"]
