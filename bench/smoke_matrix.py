#!/usr/bin/env python3
"""The smoke proof per backend and release: unfixed, after `ddcheck fix`, judged by `ddcheck smoke`.

    python bench/smoke_matrix.py prepare DEST [--device cpu|cuda] [--releases 0.5.10 0.5.16 0.5.23]
    python -m ddcheck.smoke.matrix DEST/spec.json RECORD.json --jobs N     (here, or on the GPU machine)
    python bench/smoke_matrix.py table RECORD.json

`prepare` writes under DEST (git-ignored, e.g. .carry/matrix) only the verify-path files of each
release and the fixed backend files, so a machine without sglang or network can run the matrix;
each run's expected exit code comes from the scan: 1 where `ddcheck scan` reports DD001 on that
backend's file, else 0; after `ddcheck fix --unsafe-fixes`, 0. FA3's graph path is run with graphs
captured at W (as DDTree's runners capture); captured at C it is the capture width (exit 1) where
a judged scalar is kept from capture (FA3, TRT-LLM MHA: max_seq_len_q), a limitation no backend
edit repairs, recorded as its own row. `table` prints the record.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ddcheck import backends
from ddcheck.contract import Term


def prepare(dest: Path, device: str, releases: list[str], names: list[str]) -> list[dict]:
    from ddcheck.api import scan
    from ddcheck.fixer import fixed_file_text
    from ddcheck.settings import Settings
    from ddcheck.smoke.loader import verify_path_files
    from ddcheck.sources import open_target

    spec = []
    runnable = [backends.get(n) for n in names]
    for ver in releases:
        tree = open_target(f"sglang=={ver}")
        tree_dir = dest / "trees" / ver
        modules = tuple(m for b in runnable for m in (b.module, *b.real_modules, *_input_modules(b)))
        for f in verify_path_files(tree, modules):
            out = tree_dir / f.relpath
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(f.read_bytes())
        findings = scan([f"sglang=={ver}"], settings=Settings()).findings
        for b in runnable:
            hazards = [f for f in findings if f.rule == "DD001" and f.path.endswith("!" + b.relpath)]
            base = {"target": str(tree_dir), "device": device, "backend": b.name}
            capture = {"graph_capture_width": "W"} if b.kernels is None else {}
            spec.append({"label": f"{b.name} {ver} unfixed", "expect": 1 if hazards else 0,
                         "kwargs": {**base, **capture}})
            if not hazards:
                continue
            fixed = dest / "fixed" / ver / Path(b.relpath).name
            fixed.parent.mkdir(parents=True, exist_ok=True)
            fixed.write_text(fixed_file_text(f"sglang=={ver}", b.relpath, unsafe=True))
            spec.append({"label": f"{b.name} {ver} fixed", "expect": 0,
                         "kwargs": {**base, **capture, "backend_file": str(fixed)}})
            if b.kernels is None:
                # A graph keeps the scalars it was captured with (FA3's max_seq_len_q): captured at C it
                # is wrong at W whatever the backend does; a backend judged on refilled buffers only is right.
                baked = any(t in (Term.MAX_QUERY_LEN, Term.MAX_KV_LEN) for t in b.contract_fields(graph=True).values())
                spec.append({"label": f"{b.name} {ver} fixed, graphs captured at C", "expect": 1 if baked else 0,
                             "kwargs": {**base, "backend_file": str(fixed)}})
    return spec


def _input_modules(b: backends.Backend) -> tuple[str, ...]:
    """The modules a backend's verify-input class runs from (flashinfer calls its methods)."""
    from ddcheck.smoke.api import SPEC_INFO_MODULE, SPEC_REGISTRY_MODULE

    return (b.input_class.rsplit(".", 1)[0], SPEC_INFO_MODULE, SPEC_REGISTRY_MODULE) if b.input_class else ()


def table(record: dict) -> str:
    env = record.get("environment", {})
    lines = [f"{env.get('gpu', 'cpu')}  torch {env.get('torch')}  triton {env.get('triton')}  "
             f"({record.get('seconds')} s, {record.get('jobs')} jobs)", ""]
    lines.append(f"{'run':<42} {'expect':>6} {'exit':>4}  verdict")
    for r in record["runs"]:
        mark = "" if r["met"] else "  <- NOT AS EXPECTED"
        lines.append(f"{r['label']:<42} {str(r['expect']):>6} {r['exit_code']:>4}  {r['verdict'][:110]}{mark}")
    met = sum(r["met"] for r in record["runs"])
    lines.append(f"\n{met}/{len(record['runs'])} as expected")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("dest", type=Path)
    p.add_argument("--device", default="cpu")
    p.add_argument("--releases", nargs="+", default=["0.5.10", "0.5.16", "0.5.23"])
    p.add_argument("--backends", nargs="+", default=[b.name for b in backends.BACKENDS.values() if b.runs])
    t = sub.add_parser("table")
    t.add_argument("record", type=Path)
    args = ap.parse_args()
    if args.cmd == "prepare":
        spec = prepare(args.dest, args.device, args.releases, args.backends)
        out = args.dest / "spec.json"
        out.write_text(json.dumps(spec, indent=1))
        print(f"{len(spec)} runs -> {out}")
        return 0
    print(table(json.loads(args.record.read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
