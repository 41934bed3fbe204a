#!/usr/bin/env python3
"""Where a cold whole-tree scan spends its time (the figures behind README "Speed").

Times, in this process (imports excluded, cyclic GC off as in a scan):
  open        listing and stat-ing the tree
  read        reading every file's bytes
  prefilter   the byte prefilter over them (candidates: files the analysis parses)
  analysis    the candidates analysed in one process, then split over --jobs forked workers as a
              scan splits them; per worker its total, the time in ``ModuleModel.parse`` and the time
              in the search of the tree for a helper's callers and definers (``method_uses``, parsing
              excluded)
Usage: python bench/scan_profile.py [--version 0.5.23] [--jobs 2]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scan import tree_for  # noqa: E402

from ddcheck.analysis import engine, module, scan  # noqa: E402
from ddcheck.analysis.vocabulary import DEFAULT_VOCABULARY  # noqa: E402
from ddcheck.sources import open_target  # noqa: E402

SPENT: dict[str, float] = {}


def _timed(name: str, fn):
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            SPENT[name] = SPENT.get(name, 0.0) + time.perf_counter() - t
    return wrapper


def _instrument() -> None:
    module.ModuleModel.parse = classmethod(_timed("parse", module.ModuleModel.parse.__func__))
    engine_init = engine.Engine.__init__

    def init(self, *args, **kwargs):
        engine_init(self, *args, **kwargs)
        search = self.method_uses

        def method_uses(name):
            parsed = SPENT.get("parse", 0.0)
            t = time.perf_counter()
            try:
                return search(name)
            finally:  # parsing the modules found is counted as parsing
                SPENT["search"] = SPENT.get("search", 0.0) + time.perf_counter() - t - (SPENT.get("parse", 0.0) - parsed)
        self.method_uses = method_uses
    engine.Engine.__init__ = init
    chunk = scan._analyse_chunk

    def analyse_chunk(tree, relpaths, vocab, known=None):
        SPENT.clear()
        t = time.perf_counter()
        out = chunk(tree, relpaths, vocab, known)
        print(f"    worker pid {os.getpid()}: {len(relpaths)} candidates, {time.perf_counter() - t:.2f} s "
              f"(parse {SPENT.get('parse', 0):.2f} s, caller/definer search {SPENT.get('search', 0):.2f} s)", flush=True)
        return out
    scan._analyse_chunk = analyse_chunk


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--version", default="0.5.23")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    root = tree_for(args.version)
    vocab = DEFAULT_VOCABULARY
    gc.disable()
    t = time.perf_counter()
    tree = open_target(str(root))
    t_open = time.perf_counter() - t
    t = time.perf_counter()
    known = {id(f): f.read_bytes() for f in tree.files}
    t_read = time.perf_counter() - t
    t = time.perf_counter()
    candidates = [f.relpath for f in tree.files if scan.needs_analysis(known[id(f)], vocab)]
    t_filter = time.perf_counter() - t
    sizes = {f.relpath: len(known[id(f)]) for f in tree.files}
    print(f"sglang {args.version}: {len(tree.files)} files; open {t_open:.3f} s, read {t_read:.3f} s, "
          f"prefilter {t_filter:.3f} s ({len(candidates)} candidates)")
    _instrument()
    for jobs in (1, args.jobs):
        print(f"  analysis, {jobs} process{'es' if jobs > 1 else ''}:")
        t = time.perf_counter()
        scan._analyse(tree, candidates, vocab, jobs, sizes, known)
        print(f"    wall {time.perf_counter() - t:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
