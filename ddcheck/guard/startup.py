"""Turn the guard on at interpreter start-up when ``DDCHECK_GUARD`` says so (imported by
``ddcheck/guard/site/sitecustomize.py``). ``DDCHECK_GUARD=raise|warn``, ``DDCHECK_GUARD_EVERY=N``,
``DDCHECK_GUARD_LOG=PATH`` (a JSON line per process's first violation)."""

from __future__ import annotations

import os
import sys


def start() -> None:
    mode = os.environ.get("DDCHECK_GUARD", "").strip().lower()
    if not mode or mode in ("0", "off"):
        return
    if mode not in ("raise", "warn"):
        print(f"ddcheck guard: DDCHECK_GUARD={mode!r} is not raise or warn; the guard is off", file=sys.stderr)
        return
    every = os.environ.get("DDCHECK_GUARD_EVERY", "")
    from ddcheck.guard.hook import EVERY, install

    install(mode, int(every) if every.isdigit() and int(every) > 0 else EVERY,
            log_path=os.environ.get("DDCHECK_GUARD_LOG") or None)


start()
