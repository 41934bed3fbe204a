"""Forked workers for a large tree: each reads and triages a share of the files and indexes their
method names; the shares' indexes are exchanged; then each analyses the candidates it is handed.

Reading, triage and indexing are half or more of a cold scan's work and need nothing from other
files, so they run in the workers too, not in the parent before it forks. A worker keeps the bytes
of its own share; the few other files it needs (a helper, a caller) it reads again.
"""

from __future__ import annotations

import pickle
import threading
import traceback
from dataclasses import replace

from ..sources import SourceTree
from .chunk import ChunkAnalysis, ChunkResult
from .triage import Triage, index_texts, triage
from .vocabulary import Vocabulary

_FORKED: tuple | None = None  # (tree, vocab, pending positions) inherited by the forked workers


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
        for conn, chunk in zip(conns, _chunks(merged.candidates, len(conns))):
            conn.send(chunk)
        parts = _receive_all(conns)
        # A worker reads the other shares' indexes only when its candidates are analysed: sending
        # them (~1 MB) must not hold this loop until then, or a worker done early would wait.
        senders = [threading.Thread(target=_send, args=(conn, [p for j, p in enumerate(parts) if j != i]), daemon=True)
                   for i, conn in enumerate(conns)]
        for sender in senders:
            sender.start()
        results = _receive_all(conns)
        for sender in senders:
            sender.join()
        done = True
        return merged, results
    except (OSError, EOFError):
        return None
    finally:
        _FORKED = None
        for conn in conns:
            conn.close()
        for proc in procs:
            if not done:  # stopped half-way (an error, Ctrl-C): the others' work is of no use
                proc.kill()
            proc.join()


def _send(conn, message) -> None:
    try:
        conn.send(message)
    except OSError:  # the worker is gone: the parent learns it from its next receive
        pass


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
        conn.send(("ok", pickle.dumps(own, protocol=pickle.HIGHEST_PROTOCOL)))
        analysis = ChunkAnalysis(tree, vocab, found.texts)
        for pos in conn.recv():
            analysis.add(pos)
        # Only a helper's callers and definers need the index, and only once all is analysed.
        analysis.use_index([own, *(pickle.loads(p) for p in conn.recv())], pending)
        conn.send(("ok", analysis.finish()))
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
