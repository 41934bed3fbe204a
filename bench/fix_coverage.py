#!/usr/bin/env python3
"""Share of DD001 findings that carry a fix (safe or unsafe), per sglang release, and why the others
do not. Usage: python bench/fix_coverage.py [VERSION ...] [--json OUT]   (default: 0.5.10 0.5.16 0.5.23)

Downloads the wheels on first use (cached under DDCHECK_CACHE); the scan is the same as
`ddcheck scan sglang==VERSION --format json`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

from ddcheck.scan.api import scan
from ddcheck.scan.settings import Settings

# Why a DD001 has no fix, from the hint it carries (the first matching pattern names the class).
REASONS = (
    (r"No verify input is in scope", "helper without a verify input, and no caller hands one in"),
    (r"is derived from C", "a value derived from C (W cannot simply take its place)"),
    (r"Refill this buffer", "a start-up buffer not laid out stepping by C (no automatic refill)"),
    (r"is not bound where the verify block starts", "C spelled through a call not bound at the verify block"),
)


def coverage(version: str) -> dict:
    result = scan([f"sglang=={version}"], settings=Settings())
    dd001 = [f for f in result.findings if f.rule == "DD001"]
    fixed = [f for f in dd001 if f.fix_safety]
    why = Counter()
    files = Counter()
    for f in dd001:
        if f.fix_safety:
            continue
        reason = next((name for pattern, name in REASONS if re.search(pattern, f.hint or "")), "other")
        why[reason] += 1
        files[f.path.split("!")[-1]] += 1
    return {"version": version, "dd001": len(dd001), "with_fix": len(fixed),
            "safe": sum(f.fix_safety == "safe" for f in fixed), "unsafe": sum(f.fix_safety == "unsafe" for f in fixed),
            "share": round(100 * len(fixed) / len(dd001), 1) if dd001 else 100.0,
            "without_fix": dict(why.most_common()), "files_without_fix": dict(files.most_common())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("versions", nargs="*", default=["0.5.10", "0.5.16", "0.5.23"])
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    rows = [coverage(v) for v in args.versions]
    print(f"{'release':<9} {'DD001':>6} {'fix':>5} {'safe':>5} {'unsafe':>7} {'share':>7}")
    for r in rows:
        print(f"{r['version']:<9} {r['dd001']:>6} {r['with_fix']:>5} {r['safe']:>5} {r['unsafe']:>7} {r['share']:>6}%")
    for r in rows:
        if r["without_fix"]:
            print(f"\n{r['version']}: {r['dd001'] - r['with_fix']} without a fix")
            for reason, n in r["without_fix"].items():
                print(f"  {n:>3}  {reason}")
            for path, n in r["files_without_fix"].items():
                print(f"  {n:>3}  {path}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
