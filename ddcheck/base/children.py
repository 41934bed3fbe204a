"""ddcheck's own child processes, one protocol (not SGLang's draft workers: those are the tree's).

A child is ``python COMMAND FD FOLDER [ARGS...]`` (COMMAND: ``-m MODULE``): one JSON request a line on its stdin, each naming
the file (``out``) its answer goes to; a newline on the pipe ``FD`` says the answer is written; the child
ends when its stdin closes. Its stdout and stderr are a log (the tree's C code may write there), read
back only to say why a child ended. ``FOLDER`` is the child's temporary folder, removed with it: what a
child that ends abruptly leaves there goes too. The caller's side is :class:`Child`, the child's
:func:`serve`. ``ddcheck config`` keeps one child for the launches of a process
(:mod:`ddcheck.config.child`); ``ddcheck smoke`` asks a child per run (:mod:`ddcheck.smoke.child`), and
``ddcheck audit`` keeps a tree's smoke child for that tree's next run (:class:`Kept`).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])  # the folder ddcheck is imported from, for the child too


class Child:
    """The caller's side: the interpreter's ``command`` (``["-m", MODULE]``) started with ``args`` after its
    FD and folder, in ``env`` (ddcheck's own folder first on its PYTHONPATH)."""

    def __init__(self, command: list[str], env: dict[str, str], args: tuple[str, ...] = (),
                 prefix: str = "ddcheck-") -> None:
        self.folder = tempfile.mkdtemp(prefix=prefix)
        self.log_path = os.path.join(self.folder, "child.log")
        env = dict(env)
        env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        read, write = os.pipe()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, *command, str(write), self.folder, *args],
                                         stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                         pass_fds=(write,), env=env)
        os.close(write)
        self.reply = read
        self.served = 0

    def ask(self, req: dict, timeout: float) -> dict:
        """The child's answer to ``req``; ``{"died": why}`` where it ended or did not answer in ``timeout``
        seconds (then it is ended)."""
        out = os.path.join(self.folder, f"answer-{self.served}.json")
        self.served += 1
        try:
            self.proc.stdin.write((json.dumps({**req, "out": out}) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:
            return {"died": self.why("ended before it was asked")}
        ready, _, _ = select.select([self.reply], [], [], max(timeout, 0.0))
        if not ready:
            self.proc.kill()  # busy, not listening: it would not end when its stdin closes
            self.close()
            return {"died": f"did not answer within {timeout:.0f} s"}
        if not os.read(self.reply, 1):
            return {"died": self.why("ended")}
        try:
            return json.loads(Path(out).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return {"died": f"wrote no answer ({exc})"}
        finally:
            Path(out).unlink(missing_ok=True)

    def why(self, what: str) -> str:
        """``what`` happened, with the child's exit status and the last lines of its log."""
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        try:
            tail = Path(self.log_path).read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
        except OSError:
            tail = []
        return f"{what} (exit status {code})" + (": " + " | ".join(tail) if tail else "")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.reply is None:
            return
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.reply)
        self.reply = None
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Kept:
    """Children kept between requests, by a key of the caller's (a tree: its runs share a process, never
    another tree's). :meth:`lease` hands an idle child of the key, or starts one; a child that is still
    alive afterwards waits for the key's next request, at most ``keep`` of them, the least recently used
    ended first. A child the caller closed (it died, or must not serve again) is not kept."""

    def __init__(self, keep: int = 2) -> None:
        self.keep = keep
        self._idle: list[tuple[object, Child]] = []  # least recently used first
        self._lock = threading.Lock()

    @contextmanager
    def lease(self, key: object, command: list[str], env: dict[str, str], prefix: str = "ddcheck-") -> Iterator[Child]:
        with self._lock:
            found = next((i for i, (k, _) in enumerate(self._idle) if k == key), None)
            child = self._idle.pop(found)[1] if found is not None else None
        if child is None or not child.alive():
            if child is not None:
                child.close()
            child = Child(command, env, prefix=prefix)
        try:
            yield child
        finally:
            if child.reply is not None and child.alive():
                with self._lock:
                    self._idle.append((key, child))
                    excess = max(len(self._idle) - self.keep, 0)
                    ended, self._idle = self._idle[:excess], self._idle[excess:]
                for _, old in ended:
                    old.close()
            else:
                child.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for _, child in idle:
            child.close()

    def __enter__(self) -> Kept:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def serve(answer: Callable[[dict], dict]) -> None:
    """The child's side: answer each request of stdin with ``answer(request)`` until stdin closes, then
    end at once (``os._exit``: the tree's modules and torch need no teardown). ``sys.argv[3:]`` are the
    caller's ``args``."""
    reply = int(sys.argv[1])
    tempfile.tempdir = sys.argv[2]
    for line in sys.stdin:
        req = json.loads(line)
        out = req.pop("out")
        result = answer(req)
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(result, fh)
        os.write(reply, b"\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
