"""One verify step of a real release's backend, loaded from its wheel as smoke loads it, with the
guard on: ``python tests/guard_step.py TARGET BACKEND raise|warn [fixed]`` (a test helper)."""

import os, sys
os.environ["TRITON_INTERPRET"] = "1"
from ddcheck.guard.hook import install
g = install(sys.argv[3], at_exit=False)
from ddcheck.smoke.api import run_smoke
src = None
if sys.argv[4:] == ["fixed"]:
    from ddcheck.fixer import fixed_file_text
    from ddcheck import backends
    src = fixed_file_text(sys.argv[1], backends.get(sys.argv[2]).relpath, unsafe=True)
r = run_smoke(sys.argv[1], backend=sys.argv[2], isolate=False, seed_case=False, backend_source=src, graph_capture_width="W")
print(r.exit_code, r.verdict[:300])
for p in r.paths: print(p.case, p.path, p.status, (p.error or "")[:300])
print(g.summary())
