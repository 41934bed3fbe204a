"""ddcheck guard's start-up hook: on PYTHONPATH only while ``ddcheck guard -- CMD`` runs (or where a
user puts it, ``ddcheck guard --site-dir``). It turns the guard on when DDCHECK_GUARD is set, then
runs the ``sitecustomize`` this one shadows, if the environment has one."""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))

if os.environ.get("DDCHECK_GUARD"):
    try:
        import ddcheck.guard.startup  # noqa: F401
    except Exception as exc:  # never stop the user's program from starting
        print(f"ddcheck guard: could not start ({type(exc).__name__}: {exc})", file=sys.stderr)


def _chain() -> None:
    import importlib.util

    for entry in sys.path:
        if not entry or os.path.abspath(entry) == _HERE:
            continue
        candidate = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_ddcheck_chained_sitecustomize", candidate)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return


_chain()
