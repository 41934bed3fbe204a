#!/usr/bin/env python3
"""The smoke proof on the DDTree forks: forks x backends x budgets {16, 4} x {unfixed, after the default fix}.

    python bench/fork_smoke_matrix.py DEST [--jobs N] [--device cpu|cuda] [--doc docs/forks-smoke-matrix.md]
    python bench/fork_smoke_matrix.py DEST --prepare-only        (then, e.g. on the GPU machine:)
    python -m ddcheck.smoke.matrix DEST/spec.json DEST/record.json --jobs N
    python bench/fork_smoke_matrix.py DEST --table DEST/record.json [--doc ...]

Each fork archive of the corpus (``DDCHECK_FORKS``, default ``../shared/corpus/ddtree-forks``; its
README names them) is unpacked under DEST (git-ignored, e.g. ``.carry/forks``) twice: as it is, and as
the default ``ddcheck fix`` leaves it (the whole tree fixed in place, no unsafe fixes). For each
backend ``ddcheck smoke TREE --backend B --budget N --num-draft-tokens 8 --graph-capture-width W`` runs on
both. The table gives each cell's exit code and the first words of its verdict.

The matrix fails (exit 1) on a harness failure in any cell (exit 2 or 3: smoke could not run the tree's
verify path as the tree runs it) and on a fixed cell that is not right (exit 0), except where
``EXCEPTIONS`` lists the fork and backend with the verdict it gives and the fork's code path that
explains it: a bug of the fork that is not a width, which no width fix repairs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tarfile
from pathlib import Path

from docpage import write_between

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CORPUS = Path(os.environ.get("DDCHECK_FORKS", REPO.parent / "shared" / "corpus" / "ddtree-forks"))
# short name -> archive of the corpus (its README)
FORKS = {"HaiyuZhou": "HaiyuZhou-sglang-ad7ab160.tar.gz", "DB-Guo": "DB-Guo-sglang-ddtree-dev-514ea1f3.tar.gz",
         "Rancy-Wang": "Rancy-Wang-sglang-433c58ed.tar.gz"}
BACKENDS = ["triton", "fa3", "trtllm_mha", "flashinfer", "trtllm_mla"]
BUDGETS = (16, 4)  # W = 17 > C = 8 (full tree) and W = 5 < C = 8 (spine)
C = 8

# (fork, backend) -> (the verdict's first words, why: the fork's code path), for fixed cells that are not
# right for a reason that is not a width (docs/forks.md gives the whole path).
EXCEPTIONS = {
    ("HaiyuZhou", "triton"): (
        "tree mask:", "its tree-mask builder compile_ddtree_tree (sglang/srt/speculative/ddtree_utils.py:251) lays "
        "the mask out [bs, W, max_past + W] (:274-283) while triton reads it packed per request at "
        "cumsum(W * (seq_lens + W)) (triton_backend.py:659-663): wrong whenever prefixes differ"),
    ("HaiyuZhou", "fa3"): (
        "tree crash:", "in tree mode (budget >= C) its graph capture takes the topk > 1 branch for any input "
        "with tree_budget (flashattention_backend.py:314-325) and reads target_verify_metadata_topk_normal, "
        "which init_cuda_graph_state creates only when topk > 1 (:1751), while DDTREE forces topk 1 "
        "(arg_groups/speculative_hook.py:293-301); its runner captures with such an input "
        "(model_executor/cuda_graph_runner.py:1335-1343): the launch with CUDA graphs fails at capture"),
}


def unpack(archive: Path, dest: Path) -> Path:
    """``dest/sglang``: the archive's tree (symlinks out of the tree, such as .clang-format, skipped)."""
    def keep(member, path):
        return None if member.issym() or member.islnk() else tarfile.data_filter(member, path)

    if not (dest / "sglang").is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive) as tar:
            tar.extractall(dest, filter=keep)
    return dest / "sglang"


def prepare(dest: Path, forks: list[str], names: list[str], budgets, device: str) -> list[dict]:
    """The trees (unfixed, fixed) under ``dest`` and the runs, for :func:`ddcheck.smoke.matrix.run_matrix`."""
    from ddcheck.fixer import fix_targets

    spec = []
    for fork in forks:
        archive = CORPUS / FORKS[fork]
        if not archive.is_file():
            raise SystemExit(f"no {archive} (set DDCHECK_FORKS to the corpus folder)")
        unfixed = unpack(archive, dest / "unfixed" / fork)
        fixed_root = dest / "fixed" / fork
        if not (fixed_root / "sglang").is_dir():
            shutil.copytree(unfixed.parent, fixed_root)
            changed = fix_targets([str(fixed_root / "sglang")])
            (fixed_root / "fixed.txt").write_text("".join(f"{fx.display}\n" for fx in changed))
        for variant, tree in (("unfixed", unfixed), ("fixed", fixed_root / "sglang")):
            for backend in names:
                for budget in budgets:
                    spec.append({"label": f"{fork} {backend} {variant} budget {budget}", "expect": None,
                                 "kwargs": {"target": str(tree), "backend": backend, "budget": budget,
                                            "num_draft_tokens": C, "device": device, "graph_capture_width": "W"},
                                 "cell": {"fork": fork, "backend": backend, "variant": variant, "budget": budget}})
    return spec


def judge(run: dict) -> str | None:
    """Why this run fails the matrix, or None."""
    cell, code, verdict = run["cell"], run["exit_code"], run["verdict"]
    if code not in (0, 1) or verdict.startswith(("harness failure", "control wrong")):
        return f"harness failure (exit {code})"
    if cell["variant"] == "fixed" and code != 0:
        allowed = EXCEPTIONS.get((cell["fork"], cell["backend"]))
        if allowed is None or not verdict.startswith(allowed[0]):
            return "not right after the default fix"
    return None


def table(record: dict) -> tuple[str, bool]:
    runs = [r for r in record["runs"] if r.get("cell")]
    by = {(r["cell"]["fork"], r["cell"]["backend"], r["cell"]["variant"], r["cell"]["budget"]): r for r in runs}
    budgets = sorted({r["cell"]["budget"] for r in runs}, reverse=True)
    env = record.get("environment", {})
    head = ["fork", "backend"] + [f"{v}, budget {b} (W = {b + 1})" for v in ("unfixed", "fixed") for b in budgets]
    lines = [f"{env.get('gpu', 'CPU')}, torch {env.get('torch')}, triton {env.get('triton')}; {len(runs)} runs in "
             f"{record.get('seconds')} s with {record.get('jobs')} jobs; C = {C}, graphs captured at W. A cell is "
             f"`ddcheck smoke`'s exit code and the first words of its verdict.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    bad = []
    for fork, backend in dict.fromkeys((r["cell"]["fork"], r["cell"]["backend"]) for r in runs):
        cells = []
        for variant in ("unfixed", "fixed"):
            for b in budgets:
                run = by.get((fork, backend, variant, b))
                if run is None:
                    cells.append("")
                    continue
                why = judge(run)
                if why:
                    bad.append(f"* {run['label']}: {why}: {run['verdict']}")
                word = "right" if run["exit_code"] == 0 and run["verdict"].startswith("every path") else \
                    run["verdict"].split(":", 1)[0]
                cells.append(f"{run['exit_code']} {word}" + (" **FAIL**" if why else ""))
        lines.append(f"| {fork} | {backend} | " + " | ".join(cells) + " |")
    lines += ["", "Exceptions (fixed cells not right for a reason that is not a width):", ""]
    lines += [f"* {fork} {backend} (`{words}`): {why}" for (fork, backend), (words, why) in EXCEPTIONS.items()]
    lines += ["", f"{len(runs) - len(bad)}/{len(runs)} cells pass the matrix."]
    if bad:
        lines += ["", "Failing:", ""] + bad
    return "\n".join(lines) + "\n", not bad


DOC_START, DOC_END = "<!-- fork-matrix:start -->", "<!-- fork-matrix:end -->"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dest", type=Path)
    ap.add_argument("--forks", nargs="+", default=list(FORKS), choices=list(FORKS))
    ap.add_argument("--backends", nargs="+", default=BACKENDS)
    ap.add_argument("--budgets", nargs="+", type=int, default=list(BUDGETS))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--prepare-only", action="store_true")
    ap.add_argument("--table", type=Path, nargs="+", default=None,
                    help="print the table of these records, later runs of a cell winning (no runs)")
    ap.add_argument("--record", default="record.json", help="the record's name under DEST")
    ap.add_argument("--doc", type=Path, default=None)
    args = ap.parse_args()
    if args.table is not None:
        records = [json.loads(p.read_text()) for p in args.table]
        cells = {}
        for rec in records:
            cells.update({r["label"]: r for r in rec["runs"]})
        record = {**records[-1], "runs": list(cells.values()),
                  "seconds": round(sum(r.get("seconds") or 0 for r in records), 1)}
    else:
        args.dest.mkdir(parents=True, exist_ok=True)
        spec = prepare(args.dest, args.forks, args.backends, tuple(args.budgets), args.device)
        (args.dest / "spec.json").write_text(json.dumps(spec, indent=1))
        print(f"{len(spec)} runs -> {args.dest / 'spec.json'}", flush=True)
        if args.prepare_only:
            return 0
        from ddcheck.smoke.matrix import run_matrix

        record = run_matrix(spec, args.jobs)
        (args.dest / args.record).write_text(json.dumps(record, indent=1) + "\n")
    text, ok = table(record)
    print(text)
    if args.doc is not None:
        write_between(args.doc, DOC_START, DOC_END, text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
