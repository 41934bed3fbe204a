"""Verify steps of a real release's backends, loaded from its wheel as smoke loads them, with the guard
on: ``python tests/guard_step.py TARGET raise|warn BACKEND[:fixed]...`` (a test helper). One process for
all of a release's runs: each run's report follows a line ``== BACKEND[:fixed]``, and the guard's counts
start from zero for each run."""

import os, sys
os.environ["TRITON_INTERPRET"] = "1"
from ddcheck.guard.hook import install
target, mode, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
g = install(mode, at_exit=False)
from ddcheck.smoke.api import run_smoke
for run in runs:
    backend, _, fixed = run.partition(":")
    src = None
    if fixed == "fixed":
        from ddcheck.fix.api import fixed_file_text
        from ddcheck.contract import backends
        src = fixed_file_text(target, backends.get(backend).relpath, unsafe=True)
    g.checked = 0
    g.counts.clear()
    r = run_smoke(target, backend=backend, isolate=False, seed_case=False, backend_source=src, graph_capture_width="W")
    print(f"== {run}")
    print(r.exit_code, r.verdict[:300])
    for p in r.paths: print(p.case, p.path, p.status, (p.error or "")[:300])
    print(g.summary(), flush=True)
