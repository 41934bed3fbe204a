#!/usr/bin/env python3
"""`ddcheck config` per release x GPU x model: the attention backend a launch gets when it names none.

    python bench/config_backends.py [--releases 0.5.10 0.5.16 0.5.23] [--gpus sm80 sm90 sm100 sm120]
                                    [--json RECORD.json] [--doc docs/config-backends.md]

For each release, GPU architecture and model (``fixtures/launch/models/``: ``llama``, a Llama-3-8B-shaped
MHA ``config.json``, and ``deepseek_v3``, a DeepSeek-V3-shaped MLA one, each with a one-layer draft) it
runs, through :func:`ddcheck.config.check_launch`, the launch

    ddcheck config --gpu ARCH --sglang sglang==X -- python -m sglang.launch_server --model-path MODEL
        --speculative-algorithm EAGLE --speculative-draft-model-path DRAFT
        --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4

(no backend flag) and prints the backends the release's own start-up code picked, with the tree line
that produced each (``picked_at``: the ``return`` of the selecting function; ``set_at``: the write of
the field), and the error findings. Each release runs in its own process. With --doc the table
replaces the part of the page between the ``config-backends`` markers.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from docpage import write_between

REPO = Path(__file__).resolve().parent.parent
MODELS = REPO / "fixtures" / "launch" / "models"
PAIRS = {"llama (MHA)": ("llama", "llama_eagle"), "deepseek_v3 (MLA)": ("deepseek_v3", "deepseek_v3_nextn")}
BEGIN, END = "<!-- config-backends:begin -->", "<!-- config-backends:end -->"


def launch(model: str, draft: str) -> list[str]:
    return ["python", "-m", "sglang.launch_server", "--model-path", str(MODELS / model), "--speculative-algorithm",
            "EAGLE", "--speculative-draft-model-path", str(MODELS / draft), "--speculative-num-steps", "3",
            "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]


def run_release(release: str, gpus: list[str]) -> list[dict]:
    from ddcheck.config import check_launch
    from ddcheck.rules import get_rule
    from ddcheck.tree.sources import open_target

    tree = open_target(f"sglang=={release}")
    rows = []
    for gpu in gpus:
        for label, (model, draft) in PAIRS.items():
            r = check_launch(launch(model, draft), tree=tree, gpu=gpu)
            rows.append({"release": release, "gpu": gpu, "model": label,
                         "picked": [p.model_dump() for p in r.backends_picked],
                         "verify_backend": r.settings.verify_backend if r.settings else None,
                         "selection_by": r.backend_selection_by, "note": r.backend_selection_note,
                         "errors": sorted(get_rule(f.rule).name for f in r.findings if f.severity.value == "error")})
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| release | GPU | model | backend picked | picked at | set at | errors |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        main = next((p for p in r["picked"] if p["field"] == "attention_backend"), None)
        others = ", ".join(f"{p['field']}={p['value']}" for p in r["picked"] if p is not main)
        value = (main["value"] if main else "-") + (f" ({others})" if others else "")
        if main is None and r.get("note"):
            value += f" ({r['note'][:100]})"
        lines.append(f"| {r['release']} | {r['gpu']} | {r['model']} | {value} | "
                     f"`{(main or {}).get('picked_at') or '-'}` | `{(main or {}).get('set_at') or '-'}` | "
                     f"{', '.join(r['errors']) or '-'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--releases", nargs="*", default=["0.5.10", "0.5.16", "0.5.23"])
    p.add_argument("--gpus", nargs="*", default=["sm80", "sm90", "sm100", "sm120"])
    p.add_argument("--json", type=Path, help="write the rows here")
    p.add_argument("--doc", type=Path, help="write the table into this page, between the config-backends markers")
    p.add_argument("--one", help=argparse.SUPPRESS)  # a child: one release, rows as JSON on stdout
    a = p.parse_args(argv)
    if a.one:
        print(json.dumps(run_release(a.one, a.gpus)))
        return 0
    rows: list[dict] = []
    for release in a.releases:
        child = subprocess.run([sys.executable, __file__, "--one", release, "--gpus", *a.gpus], capture_output=True,
                               text=True, cwd=REPO, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        try:
            got = json.loads(child.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            got = [{"release": release, "gpu": "*", "model": "*", "picked": [], "errors": [],
                    "note": f"the run failed: {child.stderr.strip().splitlines()[-1:] or child.returncode}"}]
        rows.extend(got)
        for r in got:
            print(f"{r['release']:<8} {r['gpu']:<6} {r['model']:<18} "
                  f"{[(x['field'], x['value'], x['picked_at'] or x['set_at']) for x in r['picked']]} "
                  f"{r.get('note') or ''} errors={r['errors']}", flush=True)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    text = table(rows)
    print(text)
    if a.doc:
        write_between(a.doc, BEGIN, END, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
