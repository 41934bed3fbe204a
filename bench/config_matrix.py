#!/usr/bin/env python3
"""`ddcheck config` per release: who resolved an EAGLE-family launch with a local model folder.

    python bench/config_matrix.py [--releases 0.4.10.post2 0.5.23 | --all] [--algorithms EAGLE ...]
                                  [--json RECORD.json] [--doc docs/config.md]

For each release (``--all``: the last post-release of every version on PyPI from 0.4.10 to 0.5.23,
as the package index lists them, :mod:`ddcheck.audit.targets`) and each algorithm the release's ``--speculative-algorithm``
accepts (EAGLE, EAGLE3, NEXTN, STANDALONE, DFLASH by default), it runs

    ddcheck config --format json --sglang sglang==X -- python -m sglang.launch_server
        --model-path DIR --speculative-algorithm A --speculative-draft-model-path DDIR
        --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4

with DIR/DDIR temporary folders holding a Llama-3-8B-shaped ``config.json`` (the draft: one layer,
``LlamaForCausalLMEagle``, ``LlamaForCausalLMEagle3`` for EAGLE3, ``DFlashDraftModel`` with
``block_size`` 4 for DFLASH), and prints per launch ``settings.resolved_by``, the tree's start-up code
that ran, C and W, and the reason the tables were used (``tree_note``) or, for the tree, how many
limitations it reported. Each release runs in its own process (its modules, its stand-ins). With --doc
the table replaces the part of the page between the ``config-matrix`` markers.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from docpage import write_between

REPO = Path(__file__).resolve().parents[1]
ALGORITHMS = ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "DFLASH"]
BEGIN, END = "<!-- config-matrix:begin -->", "<!-- config-matrix:end -->"

TARGET = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
          "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
          "num_hidden_layers": 32, "vocab_size": 128256, "max_position_embeddings": 131072,
          "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "hidden_act": "silu", "torch_dtype": "bfloat16",
          "bos_token_id": 128000, "eos_token_id": 128009, "tie_word_embeddings": False}
DRAFTS = {"EAGLE": {**TARGET, "architectures": ["LlamaForCausalLMEagle"], "num_hidden_layers": 1},
          "EAGLE3": {**TARGET, "architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 1,
                     "draft_vocab_size": 32000},
          "STANDALONE": {**TARGET, "num_hidden_layers": 2},
          "DFLASH": {**TARGET, "architectures": ["DFlashDraftModel"], "num_hidden_layers": 1, "block_size": 4}}


def model_folders(root: Path) -> dict[str, Path]:
    """name -> folder holding that model's config.json (``target`` and one draft per algorithm)."""
    out = {}
    for name, config in {"target": TARGET, **DRAFTS}.items():
        folder = root / name.lower()
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(config, indent=1))
        out[name] = folder
    return out


def launch(folders: dict[str, Path], algorithm: str) -> list[str]:
    draft = folders.get(algorithm, folders["EAGLE"])  # NEXTN: an EAGLE-shaped draft
    argv = ["python", "-m", "sglang.launch_server", "--model-path", str(folders["target"]),
            "--speculative-algorithm", algorithm, "--speculative-draft-model-path", str(draft)]
    if algorithm == "DFLASH":
        return argv
    return argv + ["--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                   "--speculative-num-draft-tokens", "4"]


def releases_on_pypi() -> list[str]:
    """The last post-release of each version from 0.4.10 to 0.5.23 on the package index."""
    sys.path.insert(0, str(REPO))
    from ddcheck.audit.targets import in_range, index_versions, last_post_releases

    return last_post_releases(in_range(">=0.4.10,<0.5.24", index_versions()))


def run_release(release: str, algorithms: list[str]) -> list[dict]:
    """The launches of one release, in this process."""
    from ddcheck.config import check_launch
    from ddcheck.rules import get_rule
    from ddcheck.config.flags import flag_table
    from ddcheck.tree.sources import open_target

    tree = open_target(f"sglang=={release}")
    known = flag_table(tree).algorithms
    rows = []
    with tempfile.TemporaryDirectory(prefix="ddcheck-models-") as tmp:
        folders = model_folders(Path(tmp))
        for algorithm in algorithms:
            if known is not None and algorithm not in known:
                rows.append({"release": release, "algorithm": algorithm, "resolved_by": "-",
                             "reason": "not an algorithm of this release"})
                continue
            r = check_launch(launch(folders, algorithm), tree=tree)
            s = r.settings
            rows.append({"release": release, "algorithm": algorithm,
                         "resolved_by": s.resolved_by if s else "-", "handler": r.handler,
                         "C": s.num_draft_tokens if s else None, "W": s.verify_width if s else None,
                         "reason": r.tree_note, "limitations": len(r.tree_limitations), "exit": r.exit_code,
                         "not_judged": r.not_judged,
                         "findings": sorted(get_rule(f.rule).name for f in r.findings if f.severity.value == "error"),
                         "sites": [site_text(v) for v in (s.verify_sites if s else [])]})
    return rows


def site_text(v) -> str:
    """One verify-input site of the launch's step: where, W there, and whether the step reaches it."""
    width = v.width if v.width is not None else (
        f"{v.width_min}..{v.width_max if v.width_max is not None else '?'}" if v.width_min is not None
        else v.per_step or v.width_expr or "?")
    reached = {True: "", None: " (some steps)", False: " (not reached)"}[v.reached]
    return f"W={width} at `{v.at}`{reached}"


def table(rows: list[dict]) -> str:
    lines = ["| release | algorithm | exit | start-up code that ran | C | W | verify sites of the step | "
             "not judged because / limitations |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        why = "; ".join(r.get("not_judged") or []) or r.get("reason") or ""
        if not why and r.get("resolved_by") == "tree":
            why = f"{r.get('limitations', 0)} limitation(s) reported"
        why = why.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {r['release']} | {r['algorithm']} | {r.get('exit', '-')} | "
                     f"`{r.get('handler') or '-'}` | {r.get('C', '-')} | {r.get('W', '-')} | "
                     f"{'; '.join(r.get('sites') or []) or '-'} | {why[:200]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--releases", nargs="*", default=["0.4.10.post2", "0.5.10", "0.5.23"])
    p.add_argument("--all", action="store_true", help="every last post-release from 0.4.10 to 0.5.23 on PyPI")
    p.add_argument("--algorithms", nargs="*", default=ALGORITHMS)
    p.add_argument("--json", type=Path, help="write the rows here")
    p.add_argument("--doc", type=Path, help="write the table into this page, between the config-matrix markers")
    p.add_argument("--one", help=argparse.SUPPRESS)  # a child: one release, rows as JSON on stdout
    a = p.parse_args(argv)
    if a.one:
        print(json.dumps(run_release(a.one, a.algorithms)))
        return 0
    releases = releases_on_pypi() if a.all else a.releases
    rows: list[dict] = []
    for release in releases:
        child = subprocess.run([sys.executable, __file__, "--one", release, "--algorithms", *a.algorithms],
                               capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        try:
            got = json.loads(child.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            got = [{"release": release, "algorithm": "*", "resolved_by": "-",
                    "reason": f"the run failed: {child.stderr.strip().splitlines()[-1:] or child.returncode}"}]
        rows.extend(got)
        for r in got:
            print(f"{r['release']:<14} {r['algorithm']:<11} {r.get('resolved_by', '-'):<7} "
                  f"C={r.get('C')} W={r.get('W')} {r.get('handler') or ''} {r.get('reason') or ''}", flush=True)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    text = table(rows)
    print(text)
    if a.doc:
        write_between(a.doc, BEGIN, END, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
