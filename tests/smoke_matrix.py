"""Prepare the release matrix for ``python -m ddcheck.smoke.matrix`` (CPU here, or the H200).

    python tests/smoke_matrix.py DEST --device cuda [--wheels DIR]

writes, under DEST (e.g. ``.carry/smoke``, git-ignored): ``trees/VER/`` -- only the verify-path
files of each release (``verify_path_files``), so a GPU machine with no sglang and no network can
run them; ``fixed/VER.py`` -- the fixed backend of each buggy release (``ddcheck fix`` when
``ddcheck.fix`` exists, else the hand fix of ``smoke_fixes``); ``partial/VER-eager.py`` -- a
fix of the eager site only; and ``spec-DEVICE.json``. Nothing of sglang is stored in the repo.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from smoke_fixes import hand_fix  # noqa: E402

from ddcheck.smoke.loader import BACKEND_RELPATH, verify_path_files  # noqa: E402
from ddcheck.tree.sources import open_target  # noqa: E402

BUGGY = ["0.5.5", "0.5.10", "0.5.14", "0.5.16"]
GOOD = ["0.5.18", "0.5.20", "0.5.21", "0.5.23"]
OTHER = ["0.5.12", "0.5.17"]  # not in the proof; recorded for completeness


def fixed_text(target: str) -> tuple[str, str]:
    """(source, how) of the fixed backend: ``ddcheck fix`` if present, else the hand fix."""
    try:
        from ddcheck.fix.api import fixed_file_text
    except ImportError:
        return hand_fix(open_target(target).read_text(BACKEND_RELPATH)), "hand fix (tests/smoke_fixes.py)"
    return fixed_file_text(target, BACKEND_RELPATH), "ddcheck fix"


def prepare(dest: Path, device: str, wheels: Path | None, long_budget: int) -> list[dict]:
    spec: list[dict] = []
    for ver in BUGGY + OTHER + GOOD:
        target = str(next(wheels.glob(f"sglang-{ver}-*.whl"))) if wheels else f"sglang=={ver}"
        tree_dir = dest / "trees" / ver
        for f in verify_path_files(open_target(target)):
            out = tree_dir / f.relpath
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(f.read_bytes())
        variants = [("unfixed", None, 1 if ver in BUGGY else 0 if ver in GOOD else None)]
        if ver in BUGGY:
            text, how = fixed_text(target)
            (dest / "fixed").mkdir(parents=True, exist_ok=True)
            (dest / "fixed" / f"{ver}.py").write_text(text)
            sha = hashlib.sha256(text.encode()).hexdigest()[:12]
            variants.append((f"fixed [{how}, sha256 {sha}]", str(dest / "fixed" / f"{ver}.py"), 0))
            if ver in ("0.5.10", "0.5.16"):
                partial = dest / "partial" / f"{ver}-eager.py"
                partial.parent.mkdir(parents=True, exist_ok=True)
                partial.write_text(hand_fix(open_target(target).read_text(BACKEND_RELPATH), ("eager",)))
                variants.append(("partial fix (eager site only)", str(partial), 1))
        for name, backend_file, expect in variants:
            base = {"target": str(tree_dir), "backend_file": backend_file, "device": device}
            # W = 17 > C = 8: the backend judged alone (graphs captured at W); captured at C, a right backend's
            # graph keeps max_extend_len = 8 < W, which breaks the verify contract: the capture width (1)
            spec.append({"label": f"{ver} {name} budget 16", "expect": expect,
                         "kwargs": {**base, "budget": 16, "graph_capture_width": "W"}})
            if expect == 0:
                spec.append({"label": f"{ver} {name} budget 16 capture@C", "expect": 1, "kwargs": {**base, "budget": 16}})
            # W = 5 < C = 8 (spine mode): a layout with C writes past the batch; the same verdicts
            spec.append({"label": f"{ver} {name} budget 4", "expect": expect, "kwargs": {**base, "budget": 4}})
            if device != "cpu":
                # W > the kernel's row block: a fixed backend is right eagerly, wrong under a graph
                # captured at C (exit 1, a capture-width limitation), right when captured at W.
                long = {**base, "budget": long_budget, "prefix_lens": [3000, 5000, 700, 64, 1500, 12000]}
                spec.append({"label": f"{ver} {name} budget {long_budget}", "expect": 1 if expect is not None else None,
                             "kwargs": long})
                if expect == 0:
                    spec.append({"label": f"{ver} {name} budget {long_budget} capture@W", "expect": 0,
                                 "kwargs": {**long, "graph_capture_width": "W"}})
    return spec


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dest", type=Path)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--wheels", type=Path, default=None, help="directory of sglang-VER-*.whl (else download)")
    ap.add_argument("--long-budget", type=int, default=136, help="W = budget + 1 past the GPU row block")
    args = ap.parse_args()
    spec = prepare(args.dest, args.device, args.wheels, args.long_budget)
    out = args.dest / f"spec-{args.device.split(':')[0]}.json"
    out.write_text(json.dumps(spec, indent=1))
    print(f"{len(spec)} runs -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
