"""One smoke server for many ``run_smoke`` calls: the suite's smoke tests share it.

``run_smoke`` runs each call in a fresh interpreter (``ddcheck.smoke.child``), which pays for torch,
triton and torch._dynamo again each time (about 10 s of a 15-25 s run on 2 cores). The tree's code
itself runs afresh in every call either way: each call is its own ``SglangImporter`` block over a new
copy of the tree, whose modules and stand-ins are removed when the block ends (``tree/runtime.py``),
as ``run_smoke`` already does for its several C's in one process. So the server (a zygote) imports
torch, triton and ddcheck once, under ``TRITON_INTERPRET=1`` as the worker does, and forks one process
per tree, which runs that tree's calls one after another with ``run_smoke(isolate=False)``. Trees never
share a process: what a tree registers with ``torch.library`` outlives its modules, and in a process
that had run 0.5.16, 0.5.10's ``layers/quantization/awq.py`` stopped while imported
(``direct_register_custom_op`` meeting 0.5.16's op), which a fresh worker never sees; on one tree the
reports are the same (``test_the_shared_worker_gives_run_smokes_own_report``).

    python tests/smoke_server.py KEEP  # stdin: one JSON line per call {"tree", "out": PATH, "kwargs"}
                                       # fd 1: "done" when PATH holds the report, "died" when the tree's
                                       # process ended without one; the trees' prints go to stderr

:class:`SmokeServer` is the test side: ``server.run(target, **kwargs) -> SmokeReport``, the same
report ``run_smoke`` returns. A call the server cannot answer (the tree's process died, or the call ran
past the timeout) is run again by ``run_smoke`` in its own worker process, so a crash is judged exactly
as it always was (exit 2).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

_RELEASE = re.compile(r"^\s*sglang\s*==")

TIMEOUT = 900  # seconds for one call; a run on CPU takes 5-30 s
KEEP = 3  # trees whose processes are kept at once (each holds 0.5-1.5 GB); the least recently used goes first


def serve(keep: int) -> int:
    """The zygote: imports what every run loads first, then forks one process per tree and hands each
    call to its tree's process; replies ``done``, or ``died`` when that process ended without a report."""
    os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton (see ddcheck.smoke.child)
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the tree's own prints must not mix with the replies
    import torch  # noqa: F401  (nothing of a tree: what a tree registers must not reach another's process)
    import torch._dynamo  # noqa: F401
    import triton  # noqa: F401

    from ddcheck.smoke.api import run_smoke

    torch.compile(lambda x: x)  # loads the compiler's modules, which every tree's decorators load
    children: dict[str, tuple[int, object, object]] = {}  # tree -> (pid, requests, replies), by last use
    try:
        for line in sys.stdin:
            tree = json.loads(line)["tree"]
            child = children.pop(tree, None) or _fork(run_smoke, children.values())
            children[tree] = child
            while len(children) > keep:
                _end(children.pop(next(iter(children))))
            try:
                child[1].write(line)
                child[1].flush()
                reply = child[2].readline()
            except OSError:
                reply = ""
            if reply != "done\n":
                _end(children.pop(tree))
                reply = "died\n"
            replies.write(reply)
            replies.flush()
    finally:
        for child in children.values():
            _end(child)
    return 0


def _fork(run_smoke, others) -> tuple[int, object, object]:
    """A process for one tree, forked from the zygote: it runs that tree's calls one after another."""
    to_child, requests = os.pipe()
    answers, from_child = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(requests)
            os.close(answers)
            for _, w, r in others:  # the other trees' pipes are theirs
                w.close()
                r.close()
            out = os.fdopen(from_child, "w")
            for line in os.fdopen(to_child):
                request = json.loads(line)
                report = run_smoke(**request["kwargs"], isolate=False)
                Path(request["out"]).write_text(report.to_json(), encoding="utf-8")
                out.write("done\n")
                out.flush()
            code = 0
        finally:
            os._exit(code)  # never back into the zygote's loop
    os.close(to_child)
    os.close(from_child)
    return pid, os.fdopen(requests, "w"), os.fdopen(answers)


def _end(child) -> None:
    pid, w, r = child
    w.close()
    r.close()
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)


class SmokeServer:
    """A lazily started ``smoke_server.py`` zygote and its trees' processes; :meth:`run` is ``run_smoke``
    through them."""

    def __init__(self, tmp: Path, keep: int = KEEP):
        self.tmp, self.keep = tmp, keep
        self.proc: subprocess.Popen | None = None
        self.calls = 0
        self.fallbacks: list[str] = []  # calls the server could not answer, run by run_smoke in its worker

    def _start(self) -> subprocess.Popen:
        import ddcheck

        env = dict(os.environ)
        root = str(Path(ddcheck.__file__).resolve().parents[1])  # the ddcheck this test process imports
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.log = open(self.tmp / "smoke-server.log", "ab")
        # its own process group: a timeout ends the zygote and its trees' processes together
        return subprocess.Popen([sys.executable, __file__, str(self.keep)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=self.log, env=env, text=True,
                                start_new_session=True)  # cwd: as run_smoke's worker, the caller's

    def run(self, target: str, **kwargs):
        from ddcheck.smoke.api import run_smoke
        from ddcheck.smoke.report import SmokeReport

        if kwargs.pop("isolate", True) is False or kwargs.get("timeout") is not None:
            raise TypeError("SmokeServer.run runs in its server: isolate and timeout are not options here")
        self.calls += 1
        out = self.tmp / f"report-{self.calls}.json"
        tree = target if _RELEASE.match(target) else str(Path(target).resolve())
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        try:
            request = {"tree": tree, "out": str(out), "kwargs": {"target": target, **kwargs}}
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            reply = _readline(self.proc, TIMEOUT)
        except (OSError, TimeoutError):
            reply = ""
        if reply.strip() == "done" and out.is_file():
            return SmokeReport.model_validate_json(out.read_text(encoding="utf-8"))
        if reply.strip() != "died":
            self.stop()
        self.fallbacks.append(f"{target} {kwargs}")
        return run_smoke(target, **kwargs)

    def stop(self) -> None:
        """Ends the zygote (which ends its trees' processes and waits for them) and waits for it."""
        if self.proc is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.proc.stdout.close()
            self.log.close()
            self.proc = None


def _readline(proc: subprocess.Popen, timeout: float) -> str:
    """One reply line, or TimeoutError (the caller kills the server)."""
    import selectors

    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise TimeoutError
    return proc.stdout.readline()


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1])))
