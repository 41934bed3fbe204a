"""One smoke worker process for many ``run_smoke`` calls: the suite's smoke tests share it.

``run_smoke`` runs each call in a fresh interpreter (``ddcheck.smoke.worker``), which pays for torch,
triton and torch._dynamo again each time (about 10 s of a 15-25 s run on 2 cores). The tree's code
itself runs afresh in every call either way: each call is its own ``SglangImporter`` block over a new
copy of the tree, whose modules and stand-ins are removed when the block ends (``target/runtime.py``),
as ``run_smoke`` already does for its several C's in one process. So the server runs the calls one
after another with ``run_smoke(isolate=False)`` under ``TRITON_INTERPRET=1``, set before triton loads,
as the worker does. Calls on different trees never share a server (:class:`SmokeServers`): what a tree
registers with ``torch.library`` outlives its modules, and in a server that had run 0.5.16, 0.5.10's
``layers/quantization/awq.py`` stopped while imported (``direct_register_custom_op`` meeting 0.5.16's
op), which a fresh worker never sees; on one tree the reports are the same
(``test_the_shared_worker_gives_run_smokes_own_report``).

    python tests/smoke_server.py      # stdin: one JSON line per call {"out": PATH, "kwargs": {...}}
                                      # fd 1: "done" when PATH holds the report; the tree's prints go to stderr

:class:`SmokeServer` is the test side: ``server.run(target, **kwargs) -> SmokeReport``, the same
report ``run_smoke`` returns. A call the server cannot answer (it died, or ran past the timeout) is run
again by ``run_smoke`` in its own worker process, so a crash is judged exactly as it always was
(exit 2), and the next call starts a new server.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

_RELEASE = re.compile(r"^\s*sglang\s*==")

TIMEOUT = 900  # seconds for one call; a run on CPU takes 5-30 s


def serve() -> int:
    os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton (see ddcheck.smoke.worker)
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the tree's own prints must not mix with the replies
    from ddcheck.smoke.api import run_smoke

    for line in sys.stdin:
        request = json.loads(line)
        report = run_smoke(**request["kwargs"], isolate=False)
        Path(request["out"]).write_text(report.to_json(), encoding="utf-8")
        replies.write("done\n")
        replies.flush()
    return 0


class SmokeServer:
    """A lazily started ``smoke_server.py`` process; :meth:`run` is ``run_smoke`` through it."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.proc: subprocess.Popen | None = None
        self.calls = 0
        self.fallbacks: list[str] = []  # calls the server could not answer, run by run_smoke in its worker

    def _start(self) -> subprocess.Popen:
        import ddcheck

        env = dict(os.environ)
        root = str(Path(ddcheck.__file__).resolve().parents[1])  # the ddcheck this test process imports
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.log = open(self.tmp / "smoke-server.log", "ab")
        return subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=self.log, env=env, text=True)  # cwd: as run_smoke's worker, the caller's

    def run(self, target: str, **kwargs):
        from ddcheck.smoke.api import run_smoke
        from ddcheck.smoke.report import SmokeReport

        if kwargs.pop("isolate", True) is False or kwargs.get("timeout") is not None:
            raise TypeError("SmokeServer.run runs in its server: isolate and timeout are not options here")
        self.calls += 1
        out = self.tmp / f"report-{self.calls}.json"
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        try:
            self.proc.stdin.write(json.dumps({"out": str(out), "kwargs": {"target": target, **kwargs}}) + "\n")
            self.proc.stdin.flush()
            reply = _readline(self.proc, TIMEOUT)
        except (OSError, TimeoutError):
            reply = ""
        if reply.strip() == "done" and out.is_file():
            return SmokeReport.model_validate_json(out.read_text(encoding="utf-8"))
        self.stop()
        self.fallbacks.append(f"{target} {kwargs}")
        return run_smoke(target, **kwargs)

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for pipe in (self.proc.stdin, self.proc.stdout):
                pipe.close()
            self.log.close()
            self.proc = None


class SmokeServers:
    """One :class:`SmokeServer` per tree: calls on the same tree share a process, calls on different trees
    never do (a tree's module-level ``torch.library`` registrations outlive its modules, and another
    release's code would meet them). At most ``keep`` servers live at once (each holds 0.5-1.5 GB); the
    one used least recently is stopped first."""

    def __init__(self, tmp: Path, keep: int = 3):
        self.tmp, self.keep = tmp, keep
        self.servers: dict[str, SmokeServer] = {}  # in order of last use

    def run(self, target: str, **kwargs):
        key = target if _RELEASE.match(target) else str(Path(target).resolve())
        server = self.servers.pop(key, None)
        if server is None:
            folder = self.tmp / f"server-{len(os.listdir(self.tmp))}"
            folder.mkdir()
            server = SmokeServer(folder)
        self.servers[key] = server
        while len(self.servers) > self.keep:
            self.servers.pop(next(iter(self.servers))).stop()
        return server.run(target, **kwargs)

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()
        self.servers.clear()


def _readline(proc: subprocess.Popen, timeout: float) -> str:
    """One reply line, or TimeoutError (the caller kills the server)."""
    import selectors

    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise TimeoutError
    return proc.stdout.readline()


if __name__ == "__main__":
    sys.exit(serve())
