"""``ddcheck guard -- CMD``: run a command with the guard on in it and in every Python process it
starts, through the environment only (PYTHONPATH gains this package's ``site`` directory, whose
``sitecustomize`` reads DDCHECK_GUARD). Nothing is installed, so nothing is left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def site_directory() -> str:
    return str(Path(__file__).resolve().parent / "site")


def guarded_env(mode: str, every: int | None, log: str | None, base: dict | None = None) -> dict:
    env = dict(os.environ if base is None else base)
    site = site_directory()
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != site]
    # the child must import this very ddcheck: a source checkout's root is added; an installed one
    # is found by the child's own interpreter (adding site-packages could mix environments)
    root = Path(__file__).resolve().parents[2]
    extra = [] if root.name in ("site-packages", "dist-packages") else [str(root)]
    env["PYTHONPATH"] = os.pathsep.join([site, *parts, *extra])
    env["DDCHECK_GUARD"] = mode
    if every:
        env["DDCHECK_GUARD_EVERY"] = str(every)
    if log:
        env["DDCHECK_GUARD_LOG"] = str(Path(log).resolve())
    return env


def run_guarded(command: list[str], mode: str, every: int | None, log: str | None) -> int:
    """The command's exit code (128 + signal when a signal ended it); 2 when it cannot start."""
    try:
        proc = subprocess.Popen(command, env=guarded_env(mode, every, log))
    except OSError as exc:
        print(f"ddcheck guard: cannot run {command[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        code = proc.wait()
    except KeyboardInterrupt:  # the child got the same SIGINT: let it finish its own way
        code = proc.wait()
    return 128 - code if code < 0 else code
