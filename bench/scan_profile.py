#!/usr/bin/env python3
"""Where a cold whole-tree scan spends its time (the figures behind README "Speed").

Times, in this process (imports excluded, cyclic GC off as in a scan):
  open        listing and stat-ing the tree
  then the scan itself, once in one process and once over --jobs forked workers as a scan runs it;
  per process:
  triage      reading its files, checking they decode, the byte prefilter (candidates: files the
              analysis parses)
  index       the method-name index of the files it read, built as triage reads them (which files
              may call or define a helper); not counted in triage
  analysis    parsing and analysing the candidates it was handed; of that, the time in
              ``ModuleModel.parse``, in the search for a helper's callers and definers (parsing and
              indexing excluded), and in ``findings()`` at the end (threading W into helpers); how many
              modules it parsed, and (for workers) how many of those another worker parsed too (in MB of source)
  (one process) how much of the function code in the modules it parsed the verify-path pass walked,
              and what checking those modules' syntax would cost without building their syntax trees:
              ``compile`` to bytecode (it catches every syntax error ``ast.parse`` does) against
              ``ast.parse``, best of 3 each
  faults      the page faults the process took (fresh memory, mostly for syntax trees); what one
              costs on this machine is printed first (64 MB touched a page at a time)
Usage: python bench/scan_profile.py [--version 0.5.23] [--jobs 2]
"""

from __future__ import annotations

import argparse
import gc
import mmap
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scan import tree_for  # noqa: E402

from ddcheck.analysis import chunk, module, names, scan, triage, verify_path, forked  # noqa: E402
from ddcheck.analysis.vocabulary import DEFAULT_VOCABULARY  # noqa: E402
from ddcheck.tree.sources import open_target  # noqa: E402

SPENT: dict[str, float] = {}
COUNTS: dict[str, int] = {}
PARSED: list[str] = []  # relpaths this process parsed
MODELS: list = []  # the modules this process parsed (kept for walked_share())
WALKED: set[int] = set()  # functions (node ids) the verify-path pass ran over
SHARED = Path(tempfile.mkdtemp(prefix="ddcheck-profile-"))  # each process writes its PARSED here


def _timed(name: str, fn, exclude: tuple[str, ...] = ()):
    """``fn`` timed into SPENT[name], less the time it spends in what ``exclude`` names."""
    def wrapper(*args, **kwargs):
        inner = sum(SPENT.get(e, 0.0) for e in exclude)
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            nested = sum(SPENT.get(e, 0.0) for e in exclude) - inner
            SPENT[name] = SPENT.get(name, 0.0) + time.perf_counter() - t - nested
    return wrapper


def _instrument() -> None:
    parse = _timed("parse", module.ModuleModel.parse.__func__)

    def recorded_parse(cls, source, *args, **kwargs):
        PARSED.append(source.relpath)
        model = parse(cls, source, *args, **kwargs)
        MODELS.append(model)
        return model
    module.ModuleModel.parse = classmethod(recorded_parse)
    run = verify_path.FunctionPass.run

    def recorded_run(self):
        WALKED.add(id(self.func.node))
        return run(self)
    verify_path.FunctionPass.run = recorded_run
    chunk.ChunkAnalysis._method_uses = _timed("search", chunk.ChunkAnalysis._method_uses, exclude=("parse", "index"))
    add = _timed("analysis", chunk.ChunkAnalysis.add)

    def counted_add(self, pos):
        COUNTS["analysed"] = COUNTS.get("analysed", 0) + 1
        return add(self, pos)
    chunk.ChunkAnalysis.add = counted_add
    index_into = _timed("index", names.index_into)
    names.index_into = index_into  # files outside the scanned ones, indexed on the first question
    triage.index_into = index_into  # each file as triage reads it
    run_triage = _timed("triage", triage.triage, exclude=("index",))

    def counted_triage(tree, positions, vocab):
        SPENT.clear()
        PARSED.clear()
        COUNTS["faults"] = _faults()
        COUNTS["analysed"] = 0
        out = run_triage(tree, positions, vocab)
        COUNTS["candidates"] = len(out.candidates)
        COUNTS["files"] = len(positions)
        return out
    scan.triage = forked.triage = counted_triage
    finish = chunk.ChunkAnalysis.finish

    def report(self):
        t, indexed = time.perf_counter(), SPENT.get("index", 0.0)
        out = finish(self)  # files outside the scanned ones are indexed here, on the first question
        SPENT["findings"] = time.perf_counter() - t - (SPENT.get("index", 0.0) - indexed)
        SPENT["analysis"] = SPENT.get("analysis", 0.0) + SPENT["findings"]
        (SHARED / str(os.getpid())).write_text("\n".join(PARSED))
        print(f"    pid {os.getpid()}: triage {SPENT.get('triage', 0):.2f} s ({COUNTS['files']} files, "
              f"{COUNTS['candidates']} candidates), index {SPENT.get('index', 0):.2f} s, analysis "
              f"{SPENT.get('analysis', 0):.2f} s of {COUNTS['analysed']} candidates (parse {SPENT.get('parse', 0):.2f} s "
              f"of {len(PARSED)} modules, caller/definer search {SPENT.get('search', 0):.2f} s, findings() "
              f"{SPENT['findings']:.2f} s); {_faults() - COUNTS['faults']} page faults", flush=True)
        return out
    chunk.ChunkAnalysis.finish = report


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def fault_cost() -> float:
    """Microseconds per page fault on this machine: 64 MB of fresh memory touched a page at a time."""
    size = 64 << 20
    buf = mmap.mmap(-1, size)
    before, t = _faults(), time.perf_counter()
    for off in range(0, size, mmap.PAGESIZE):
        buf[off] = 1
    spent, faults = time.perf_counter() - t, _faults() - before
    buf.close()
    return spent / max(faults, 1) * 1e6


def walked_share() -> tuple[int, int]:
    """(bytes of the functions the verify-path pass ran over, bytes of all functions) in the modules
    this process parsed: how much of what is parsed the analysis walks."""
    walked = total = 0
    for m in MODELS:
        for f in m.functions.values():
            if "<locals>" not in f.qualname:
                size = len(m.text_of(f.node).encode())
                total += size
                walked += size if id(f.node) in WALKED else 0
    return walked, total


def syntax_check_cost() -> tuple[float, float]:
    """(seconds to compile the modules this process parsed to bytecode, seconds to ``ast.parse`` them),
    best of three each: a whole-file syntax check that builds no syntax tree, against the parse."""
    import ast

    texts = [(m.text, m.source.display) for m in MODELS]
    best = {}
    for name, fn in (("compile", lambda t, d: compile(t, d, "exec", dont_inherit=True)),
                     ("parse", lambda t, d: ast.parse(t, d))):
        runs = []
        for _ in range(3):
            t0 = time.perf_counter()
            for text, display in texts:
                try:
                    fn(text, display)
                except SyntaxError:  # compile also refuses what parses (`return` outside a function)
                    pass
            runs.append(time.perf_counter() - t0)
        best[name] = min(runs)
    return best["compile"], best["parse"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--version", default="0.5.23")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    root = tree_for(args.version)
    gc.disable()
    t = time.perf_counter()
    tree = open_target(str(root))
    print(f"sglang {args.version}: {len(tree.files)} files; open {time.perf_counter() - t:.3f} s; "
          f"a page fault costs {fault_cost():.1f} us here")
    _instrument()
    for jobs in (1, args.jobs):
        print(f"  scan, {jobs} process{'es' if jobs > 1 else ''}:")
        t = time.perf_counter()
        scan.scan_trees([tree], DEFAULT_VOCABULARY, jobs=jobs)
        print(f"    wall {time.perf_counter() - t:.2f} s")
        if jobs == 1:
            walked, total = walked_share()
            print(f"    the verify-path pass ran over {walked / 1e6:.2f} of the {total / 1e6:.2f} MB of functions "
                  f"in the {len(MODELS)} modules parsed")
            compiled, parsed_t = syntax_check_cost()
            print(f"    their syntax checked by compiling to bytecode: {compiled:.2f} s; ast.parse: {parsed_t:.2f} s")
        parsed = [set(p.read_text().split("\n")) - {""} for p in SHARED.iterdir()]
        if len(parsed) > 1:
            size = {f.relpath: len(f.read_bytes()) for f in tree.files}
            twice = {r for r in set().union(*parsed) if sum(r in p for p in parsed) > 1}
            mb = sum(size[r] for p in parsed for r in p) / 1e6
            again = sum(size[r] * (sum(r in p for p in parsed) - 1) for r in twice) / 1e6
            print(f"    modules parsed: {sum(map(len, parsed))} ({mb:.2f} MB), {len(twice)} of them by more than one "
                  f"worker ({again:.2f} MB parsed again)")
        for p in SHARED.iterdir():
            p.unlink()
    SHARED.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
