#!/usr/bin/env python3
"""The smoke proof per backend and release: unfixed, after the default `ddcheck fix`, at W > C and W < C.

    python bench/smoke_matrix.py all DEST [--jobs N] [--doc docs/smoke-matrix.md]   (prepare, run, table)
    python bench/smoke_matrix.py prepare DEST [--device cpu|cuda] [--releases ...] [--backends ...]
    python -m ddcheck.smoke.matrix DEST/spec.json RECORD.json --jobs N     (here, or on the GPU machine)
    python bench/smoke_matrix.py table RECORD.json [--doc docs/smoke-matrix.md]
    python bench/smoke_matrix.py rerun DEST [--jobs N] [--doc ...]   (again, the runs of DEST/record.json not as expected)

For each release and backend, `ddcheck smoke --backend B --graph-capture-width W` runs at budget 16
(W = 17 > C = 8) and at budget 4 (W = 5 < C = 8) on the unfixed wheel and on the file as the *default*
`ddcheck fix` (no unsafe fixes) leaves it. The expected exit code of an unfixed run comes from the scan:
1 where `ddcheck scan` reports DD001 on that backend's file (its verify path lays out with C; the first
finding's file:line is the evidence in the table), else 0; every fixed run is expected to exit 0. Where
the default fix changes nothing the fixed cell is the unfixed run. `--capture-c` adds the fixed file with
graphs captured at C (what SGLang's runner does), whose expected verdict is 0 or "capture width" (1).

`prepare` writes under DEST (git-ignored, e.g. .carry/matrix) the releases' sglang files and the fixed
backend files, so a machine without sglang or network can run the matrix. `table` prints the record as
a markdown table, and with --doc writes it into that page.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from docpage import write_between

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ddcheck import backends  # noqa: E402

RELEASES = ["0.5.10", "0.5.16", "0.5.23"]
BACKENDS = ["triton", "fa3", "trtllm_mha", "flashinfer", "trtllm_mla"]
BUDGETS = (16, 4)  # W = 17 > C = 8 (full-tree mode) and W = 5 < C = 8 (spine mode)
C = 8


def prepare(dest: Path, device: str, releases: list[str], names: list[str], budgets=BUDGETS,
            capture_c: bool = False) -> list[dict]:
    """The runs, each ``{label, expect, kwargs, cell}`` (``cell``: release, backend, variant, budget,
    evidence), for :func:`ddcheck.smoke.matrix.run_matrix`."""
    from ddcheck.api import scan
    from ddcheck.fixer import fixed_file_text
    from ddcheck.settings import Settings
    from ddcheck.smoke.loader import verify_path_files
    from ddcheck.tree.sources import open_target

    spec = []
    chosen = [backends.get(n) for n in names]
    for ver in releases:
        target = f"sglang=={ver}"
        tree = open_target(target)
        tree_dir = dest / "trees" / ver
        if not tree_dir.is_dir():
            for f in verify_path_files(tree):
                out = tree_dir / f.relpath
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(f.read_bytes())
        findings = scan([target], settings=Settings()).findings
        for b in chosen:
            if tree.file_at(b.relpath) is None:  # a backend this release does not ship: no cell
                print(f"{ver}: no {b.relpath}, {b.name} left out", file=sys.stderr)
                continue
            hazards = sorted((f for f in findings if f.rule == "DD001" and f.path.endswith("!" + b.relpath)),
                             key=lambda f: f.line)
            evidence = (f"DD001 x{len(hazards)}, first {b.relpath.rsplit('/', 1)[-1]}:{hazards[0].line}"
                        if hazards else "no DD001")
            base = {"target": str(tree_dir), "device": device, "backend": b.name, "num_draft_tokens": C}
            original = tree.read_text(b.relpath)
            fixed_text = fixed_file_text(target, b.relpath)
            fixed = None
            if fixed_text != original:
                fixed = dest / "fixed" / ver / Path(b.relpath).name
                fixed.parent.mkdir(parents=True, exist_ok=True)
                fixed.write_text(fixed_text)
            variants = [("unfixed", None, 1 if hazards else 0, "W")]
            if fixed is not None:
                variants.append(("fixed", str(fixed), 0, "W"))
                if capture_c:
                    variants.append(("fixed, captured at C", str(fixed), None, "C"))
            for variant, backend_file, expect, cw in variants:
                for budget in budgets:
                    kwargs = {**base, "budget": budget, "graph_capture_width": cw}
                    if backend_file:
                        kwargs["backend_file"] = backend_file
                    cell = {"release": ver, "backend": b.name, "variant": variant, "budget": budget,
                            "evidence": evidence, "fix_changed": fixed is not None}
                    spec.append({"label": f"{b.name} {ver} {variant} budget {budget}", "expect": expect,
                                 "kwargs": kwargs, "cell": cell})
    return spec


# (release, backend) -> (the verdict's first words, why: the tree's code path), for cells that are not as
# the scan expects for a reason that is not a width (the tree's own path fails at every width)
EXCEPTIONS = {
    ("0.4.10.post2", "trtllm_mla"): (
        "tree crash: at W == C as well", "on the graph path (a GPU runs it), its init_cuda_graph_state "
        "(trtllm_mla_backend.py:156-170) replaces the parent's without calling it, so cuda_graph_qo_indptr "
        "(made at flashinfer_mla_backend.py:217) never exists when the target-verify capture it hands to the "
        "parent (trtllm_mla_backend.py:183-185) reads it (flashinfer_mla_backend.py:269): a launch with CUDA "
        "graphs fails at capture at every width"),
}


def _listed(run: dict) -> bool:
    """A run not as expected for a listed reason (``EXCEPTIONS``)."""
    cell = run.get("cell") or {}
    words = EXCEPTIONS.get((cell.get("release"), cell.get("backend")), ("\0",))[0]
    return run["verdict"].startswith(words)


# a record made before 78632f9, when smoke fell back to ddcheck's fakes where the tree's runtime stopped
FAKES = (" '(fakes)': a run of a ddcheck that still fell back to its fakes of the tree's runtime where that "
         "stopped on this machine (the report's first limitation says where); that fallback is gone (78632f9): "
         "run the matrix again for the tree's own verdict.")


def _cell(run: dict | None) -> str:
    if run is None:
        return ""
    mark = "" if run["met"] else " (listed)" if _listed(run) else f" (expected {run['expect']})"
    cause = " capture width" if run["verdict"].startswith("capture width") else ""
    fakes = " (fakes)" if (run.get("report") or {}).get("loader") == "fakes" else ""
    return f"{run['exit_code']}{cause}{fakes}{mark}"


def table(record: dict) -> str:
    """The record as markdown: one row per release and backend, a column per variant and budget."""
    env = record.get("environment", {})
    runs = [r for r in record["runs"] if r.get("cell")]
    budgets = sorted({r["cell"]["budget"] for r in runs}, reverse=True)
    variants = list(dict.fromkeys(r["cell"]["variant"] for r in runs))
    if "fixed" not in variants:
        variants.append("fixed")
    by = {(r["cell"]["release"], r["cell"]["backend"], r["cell"]["variant"], r["cell"]["budget"]): r for r in runs}
    head = ["release", "backend", "scan (unfixed)"] + [f"{v}, budget {b} (W = {b + 1})" for v in variants
                                                       for b in budgets]
    lines = [f"{env.get('gpu', 'CPU')}, torch {env.get('torch')}, triton {env.get('triton')}; "
             f"{len(record['runs'])} runs in {record.get('seconds')} s with {record.get('jobs')} jobs"
             f"{' (' + str(record['reruns']) + ' run again)' if record.get('reruns') else ''}; C = {C}, "
             f"graphs captured at W unless the column says C. A cell is the exit code of `ddcheck smoke`; "
             f"'=' a fixed cell where the default fix changes nothing (the unfixed run)."
             + (FAKES if any((r.get("report") or {}).get("loader") == "fakes" for r in runs) else ""), "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    seen = list(dict.fromkeys((r["cell"]["release"], r["cell"]["backend"]) for r in runs))
    for rel, name in seen:
        first = next(r for r in runs if (r["cell"]["release"], r["cell"]["backend"]) == (rel, name))
        cells = []
        for v in variants:
            for b in budgets:
                run = by.get((rel, name, v, b))
                if run is None and v == "fixed" and not first["cell"]["fix_changed"]:
                    cells.append("= " + _cell(by.get((rel, name, "unfixed", b))))
                else:
                    cells.append(_cell(run))
        lines.append(f"| {rel} | {name} | {first['cell']['evidence']} | " + " | ".join(cells) + " |")
    met = sum(r["met"] for r in record["runs"])
    listed = [r for r in record["runs"] if not r["met"] and _listed(r)]
    lines += ["", f"{met}/{len(record['runs'])} runs as expected"
              + (f", {len(listed)} more a listed exception" if listed else "") + ".", ""]
    shown = {(r["cell"]["release"], r["cell"]["backend"]) for r in listed}
    if shown:
        lines += ["Exceptions (not a width; the tree's code path):", ""]
        lines += [f"* {rel} {name} (`{EXCEPTIONS[rel, name][0]}`): {EXCEPTIONS[rel, name][1]}"
                  for rel, name in sorted(shown)] + [""]
    bad = [r for r in record["runs"] if not r["met"] and not _listed(r)]
    if bad:
        lines.append("Not as expected:")
        lines.append("")
        lines += [f"* {r['label']}: exit {r['exit_code']}, expected {r['expect']}: {r['verdict']}" for r in bad]
    return "\n".join(lines) + "\n"


def rerun(dest: Path, jobs: int) -> dict:
    """Run again the runs of ``dest/record.json`` that were not as expected, and rewrite the record."""
    from ddcheck.smoke.matrix import run_matrix

    path = dest / "record.json"
    record = json.loads(path.read_text())
    spec = {e["label"]: e for e in json.loads((dest / "spec.json").read_text())}
    again = run_matrix([spec[r["label"]] for r in record["runs"] if not r["met"]], jobs)
    fresh = {r["label"]: r for r in again["runs"]}
    record["runs"] = [fresh.get(r["label"], r) for r in record["runs"]]
    record["all_met"] = all(r["met"] for r in record["runs"])
    record["seconds"] = round(record["seconds"] + again["seconds"], 1)
    record["reruns"] = record.get("reruns", 0) + len(fresh)
    path.write_text(json.dumps(record, indent=1) + "\n")
    return record


def write_doc(doc: Path, text: str, section: str = "matrix") -> None:
    """Put the table between the page's markers for ``section`` (the page is made with them when it has none)."""
    write_between(doc, f"<!-- {section}:start -->", f"<!-- {section}:end -->", text, new_page=(
        "# `ddcheck smoke` matrix: releases x backends, unfixed and after the default `ddcheck fix`\n\n"
        "Made by `python bench/smoke_matrix.py all .carry/matrix --doc docs/smoke-matrix.md` (see docs/smoke.md).\n\n"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("prepare", "all"):
        p = sub.add_parser(name)
        p.add_argument("dest", type=Path)
        p.add_argument("--device", default="cpu")
        p.add_argument("--releases", nargs="+", default=RELEASES)
        p.add_argument("--backends", nargs="+", default=BACKENDS)
        p.add_argument("--budgets", nargs="+", type=int, default=list(BUDGETS))
        p.add_argument("--capture-c", action="store_true", help="also the fixed file with graphs captured at C")
        if name == "all":
            p.add_argument("--jobs", type=int, default=2)
            p.add_argument("--doc", type=Path, default=None)
    r = sub.add_parser("rerun")
    r.add_argument("dest", type=Path)
    r.add_argument("--jobs", type=int, default=2)
    r.add_argument("--doc", type=Path, default=None)
    t = sub.add_parser("table")
    t.add_argument("record", type=Path, nargs="+", help="records; a later one's runs replace an earlier one's")
    t.add_argument("--doc", type=Path, default=None)
    t.add_argument("--section", default="matrix", help="the page's markers: <!-- SECTION:start --> ... end")
    args = ap.parse_args()
    if args.cmd in ("prepare", "all"):
        args.dest.mkdir(parents=True, exist_ok=True)
        spec = prepare(args.dest, args.device, args.releases, args.backends, tuple(args.budgets), args.capture_c)
        out = args.dest / "spec.json"
        out.write_text(json.dumps(spec, indent=1))
        print(f"{len(spec)} runs -> {out}", flush=True)
        if args.cmd == "prepare":
            return 0
        from ddcheck.smoke.matrix import run_matrix

        record = run_matrix(spec, args.jobs)
        path = args.dest / "record.json"
        path.write_text(json.dumps(record, indent=1) + "\n")
    elif args.cmd == "rerun":
        record = rerun(args.dest, args.jobs)
    else:  # later records win over earlier ones, run by run (a part run again elsewhere)
        records = [json.loads(p.read_text()) for p in args.record]
        record = records[0]
        for more in records[1:]:
            fresh = {r["label"]: r for r in more["runs"]}
            record["runs"] = [fresh.pop(r["label"], r) for r in record["runs"]] + list(fresh.values())
            record["seconds"] = round(record.get("seconds", 0) + more.get("seconds", 0), 1)
            record["reruns"] = record.get("reruns", 0) + len(more["runs"])
    text = table(record)
    print(text)
    if args.doc is not None:
        write_doc(args.doc, text, getattr(args, "section", "matrix"))
    return 0 if all(r["met"] or _listed(r) for r in record["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
