"""Forked workers for a large tree: each reads and triages a share of the files and indexes their
method names; the shares' indexes are exchanged; then each analyses the candidates it is handed.

Reading, triage and indexing are half or more of a cold scan's work and need nothing from other
files, so they run in the workers too, not in the parent before it forks. A worker keeps the bytes
of its own share; the few other files it needs (a helper, a caller) it reads again. A module one
worker parsed, another need not parse only to learn what its classes derive from: each worker sends
the outlines of the modules it parsed as it goes, and the parent passes them on.
"""

from __future__ import annotations

import pickle
import queue
import threading
import traceback
from dataclasses import replace

from ..sources import SourceTree
from .chunk import ChunkAnalysis, ChunkResult
from .triage import Triage, index_texts, triage
from .vocabulary import Vocabulary

_FORKED: tuple | None = None  # (tree, vocab, pending positions) inherited by the forked workers
# What a worker sends besides its triage and result, for the parent to pass on to the others.
INDEX, OUTLINES = "index", "outlines"


def run(tree: SourceTree, positions: list[int], vocab: Vocabulary, jobs: int) -> tuple[Triage, list[ChunkResult]] | None:
    """Triage ``positions`` of ``tree`` and analyse the candidates in ``jobs`` forked workers; None
    where workers cannot be forked or one died (the caller then scans in this process)."""
    import multiprocessing as mp  # only a scan large enough to fork pays for loading it
    from multiprocessing.connection import Connection

    if "fork" not in mp.get_all_start_methods():
        return None
    ctx = mp.get_context("fork")
    wanted = set(positions)
    pending = [i for i in range(len(tree.files)) if i not in wanted]  # indexed on demand, for lookups only
    global _FORKED
    _FORKED = (tree, vocab, pending)
    conns: list[Connection] = []
    procs = []
    outboxes: list[_Outbox] = []
    done = False
    try:
        for share in _shares(tree, positions, jobs):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_work, args=(child, share), daemon=True)
            proc.start()
            child.close()
            conns.append(parent)
            procs.append(proc)
        merged = Triage()
        for found in _receive_all(conns):
            merged.merge(found)
        merged.candidates.sort()
        outboxes = [_Outbox(conn) for conn in conns]
        for box, chunk in zip(outboxes, _chunks(merged.candidates, len(conns))):
            box.put((len(conns), chunk))
        results = _relay(conns, outboxes)
        done = True
        return merged, results
    except (OSError, EOFError):
        return None
    finally:
        _FORKED = None
        for proc in procs:
            if not done:  # stopped half-way (an error, Ctrl-C): the others' work is of no use
                proc.kill()
        for box in outboxes:
            box.close()
        for conn in conns:
            conn.close()
        for proc in procs:
            proc.join()


class _Outbox:
    """Messages to one worker, sent in order by a thread of their own: the parent must go on reading
    what the workers send while a worker busy analysing has not read what it was sent."""

    def __init__(self, conn) -> None:
        self.conn = conn
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._send_all, daemon=True)
        self.thread.start()

    def put(self, message) -> None:
        self.queue.put(message)

    def close(self) -> None:
        """Wait until all is sent, or the worker has gone (its end closed: a send then fails)."""
        self.queue.put(None)
        self.thread.join()

    def _send_all(self) -> None:
        while (message := self.queue.get()) is not None:
            try:
                self.conn.send(message)
            except OSError:  # the worker is gone: the parent learns it from its next receive
                while self.queue.get() is not None:
                    pass
                return


def _relay(conns: list, outboxes: list[_Outbox]) -> list[ChunkResult]:
    """Pass each worker's index and outlines on to the others, until every worker sent its result."""
    from multiprocessing.connection import wait

    results: dict[int, ChunkResult] = {}
    while len(results) < len(conns):
        for conn in wait([c for i, c in enumerate(conns) if i not in results]):
            i = conns.index(conn)
            tag, payload = _receive(conn)
            if tag in (INDEX, OUTLINES):
                for j, box in enumerate(outboxes):
                    if j != i:
                        box.put((tag, payload))
            else:
                results[i] = payload
    return [results[i] for i in range(len(conns))]


def _receive_all(conns: list) -> list:
    """One message from each worker, taken as each is sent (a large one blocks its sender until read)."""
    from multiprocessing.connection import wait

    got: dict[int, object] = {}
    while len(got) < len(conns):
        for conn in wait([c for i, c in enumerate(conns) if i not in got]):
            got[conns.index(conn)] = _receive(conn)
    return [got[i] for i in range(len(conns))]


def _receive(conn):
    tag, payload = conn.recv()
    if tag == "error":
        raise payload
    return payload


def _shares(tree: SourceTree, positions: list[int], jobs: int) -> list[list[int]]:
    """Consecutive runs of ``positions`` of about equal bytes (file count where sizes are unknown):
    a file goes to the share its middle byte falls in, so no two shares differ by more than the
    largest file."""
    sizes = [(tree.files[p].stamp or (1,))[0] or 1 for p in positions]
    total = sum(sizes)
    shares: list[list[int]] = [[] for _ in range(max(1, min(jobs, len(positions))))]
    done = 0
    for pos, size in zip(positions, sizes):
        shares[min(len(shares) - 1, (2 * done + size) * len(shares) // (2 * total))].append(pos)
        done += size
    return [s for s in shares if s]


def _chunks(candidates: list[tuple[int, int]], n: int) -> list[list[int]]:
    """Largest first, each to the least loaded worker: parse and analysis time follow file size."""
    chunks: list[list[int]] = [[] for _ in range(n)]
    load = [0] * n
    for pos, size in sorted(candidates, key=lambda c: -c[1]):
        i = load.index(min(load))
        chunks[i].append(pos)
        load[i] += size
    return chunks


def _work(conn, share: list[int]) -> None:
    tree, vocab, pending = _FORKED
    try:
        found = triage(tree, share, vocab)
        conn.send(("ok", replace(found, texts={})))  # the parent needs what triage learnt, not the bytes
        # Indexed while the parent waits for the other shares' triage to hand out the candidates.
        own = index_texts(found)
        conn.send(("ok", (INDEX, pickle.dumps(own, protocol=pickle.HIGHEST_PROTOCOL))))
        analysis = ChunkAnalysis(tree, vocab, found.texts)
        workers, chunk = conn.recv()
        for pos in chunk:
            analysis.add(pos)
            fresh = analysis.fresh_outlines()
            if fresh:
                conn.send(("ok", (OUTLINES, pickle.dumps(fresh, protocol=pickle.HIGHEST_PROTOCOL))))
        # Only a helper's callers and definers need the index and the outlines, and only once all
        # is analysed: every other share's index, and the outlines sent so far.
        parts = [own]
        while len(parts) < workers or conn.poll():
            tag, payload = conn.recv()
            if tag == INDEX:
                parts.append(pickle.loads(payload))
            else:
                analysis.outlines.update((o.relpath, o) for o in pickle.loads(payload))
        analysis.use_index(parts, pending)
        conn.send(("ok", ("result", analysis.finish())))
    except KeyboardInterrupt:
        pass  # Ctrl-C reached the parent too: it stops the scan and says so
    except BaseException as exc:  # the parent re-raises it, as a process pool would
        _report(conn, exc)
    finally:
        conn.close()


def _report(conn, exc: BaseException) -> None:
    """Hand a worker's error to the parent, as text if it cannot be pickled; not when the parent is gone."""
    try:
        conn.send(("error", exc))
    except OSError:
        pass
    except Exception:  # pickled before anything is written: nothing half-sent
        try:
            conn.send(("error", RuntimeError("".join(traceback.format_exception(exc)))))
        except OSError:
            pass
