"""Forked workers for a large tree (:mod:`.channel`): each reads, triages and indexes a share of the
files (every n-th one); the shares' indexes are exchanged; then each analyses candidates, one at a
time as it asks for them (largest first of those found so far: a worker that ends its share first
starts on what its triage found, not waiting for the others'), so the workers end together however
long a candidate takes, and between candidates loads what threading W into the helpers found so far
will read.

Reading, triage and indexing are a third of a cold scan's work and need nothing from other files,
so they run in the workers too, not in the parent before it forks. A worker keeps the bytes of its
share's candidates; the few other files it needs (a helper, a caller) it reads again. A module one
worker parsed, another need not parse only to learn what its classes derive from: each worker sends
the outlines of the modules it parsed as it goes, and the parent passes them on.
"""

from __future__ import annotations

import marshal
import pickle
import queue
import threading
from dataclasses import replace

from ddcheck.tree.sources import SourceTree
from ddcheck.analysis import channel
from ddcheck.analysis.chunk import ChunkAnalysis, ChunkResult
from ddcheck.analysis.triage import Triage, triage
from ddcheck.analysis.vocabulary import Vocabulary

_FORKED: tuple | None = None  # (tree, vocab, unread positions, check_syntax) inherited by the forked workers
# What a worker sends: what its triage learnt (TRIAGE), what the parent passes on to the others (INDEX,
# OUTLINES), a request for its next candidate (NEXT, answered with a position or None), its RESULT.
TRIAGE, INDEX, OUTLINES, NEXT, RESULT = "triage", "index", "outlines", "next", "result"


def run(tree: SourceTree, positions: list[int], unread: list[int], vocab: Vocabulary,
        jobs: int, check_syntax: bool = False) -> tuple[Triage, list[ChunkResult]] | None:
    """Triage ``positions`` of ``tree`` and analyse the candidates in ``jobs`` forked workers (the
    ``unread`` files are indexed on demand, for lookups only); None where workers cannot be forked or
    one died (the caller then scans in this process)."""
    if not channel.can_fork():
        return None
    from ddcheck.rules import all_rules

    all_rules()  # read once here, not in each worker as it reports its findings
    global _FORKED
    _FORKED = (tree, vocab, unread, check_syntax)
    procs: list[channel.Worker] = []
    outboxes: list[_Outbox] = []
    done = False
    try:
        shares = _shares(positions, jobs)
        for share in shares:
            procs.append(channel.Worker(_work, (share, len(shares)), [p.channel for p in procs]))
        conns = [p.channel for p in procs]
        outboxes = [_Outbox(conn) for conn in conns]
        merged = Triage()
        results = _relay(conns, outboxes, _Handout(tree, len(conns)), merged)
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
        for proc in procs:
            proc.channel.close()
            if done:  # a worker that has sent its result takes ~10 ms more to exit (its memory freed)
                threading.Thread(target=proc.join, daemon=True).start()
            else:
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


class _Handout:
    """The candidates not handed out yet, as the workers' triage finds them; largest first (parse and
    analysis time follow file size, and small ones last even out the end). A worker that asks gets the
    largest one it has parsed already (as a helper of another), else the largest no other worker has
    parsed, else the largest: a module is parsed twice only when no other choice is left."""

    def __init__(self, tree: SourceTree, workers: int) -> None:
        self.tree = tree
        self.left: list[tuple[int, int]] = []  # (-size, position), largest first
        self.parsed: list[set[str]] = [set() for _ in range(workers)]  # relpaths each worker parsed

    def add(self, candidates: list[tuple[int, int]]) -> None:
        """The (position, size) of the candidates one worker's triage found."""
        self.left = sorted(self.left + [(-size, pos) for pos, size in candidates])

    def take(self, worker: int) -> int | None:
        if not self.left:
            return None
        files, mine = self.tree.files, self.parsed[worker]
        at = next((k for k, (_, pos) in enumerate(self.left) if files[pos].relpath in mine), None)
        if at is None:
            others = set().union(*(p for i, p in enumerate(self.parsed) if i != worker))
            at = next((k for k, (_, pos) in enumerate(self.left) if files[pos].relpath not in others), 0)
        return self.left.pop(at)[1]


def _relay(conns: list, outboxes: list[_Outbox], handout: _Handout, merged: Triage) -> list[ChunkResult]:
    """Take in each worker's triage, hand out the candidates to the workers as they ask, pass each
    worker's index and outlines on to the others, until every worker sent its result. Candidates are
    handed out as soon as one worker's triage found some: a worker that ends its share first does not
    wait for the others (`bench/scan_profile.py` prints each share's triage time)."""
    results: dict[int, ChunkResult] = {}
    triaged = 0
    waiting: list[int] = []  # workers that asked when nothing was left and some triage was still to come
    while len(results) < len(conns):
        for conn in channel.wait([c for i, c in enumerate(conns) if i not in results]):
            i = conns.index(conn)
            tag, payload = _receive(conn)
            if tag == TRIAGE:
                merged.merge(payload)
                handout.add(payload.candidates)
                triaged += 1
            elif tag == NEXT:
                waiting.append(i)
            elif tag == RESULT:
                results[i] = payload
            else:
                if tag == OUTLINES:
                    relpaths, payload = payload
                    handout.parsed[i].update(relpaths)
                for j, box in enumerate(outboxes):
                    if j != i:
                        box.put((tag, payload))
            while waiting and (handout.left or triaged == len(conns)):
                w = waiting.pop(0)
                outboxes[w].put((NEXT, handout.take(w)))
    return [results[i] for i in range(len(conns))]


def _receive(conn):
    tag, payload = conn.recv()
    if tag == "error":
        raise payload
    return payload


def _shares(positions: list[int], jobs: int) -> list[list[int]]:
    """Every ``jobs``-th position, from each start: shares in tree order, of one count (within one)
    and about one size, each holding files of every folder and kind (0.5.23: bytes within 1 %), with
    no file's size asked (a stat each: ~15 ms of a large tree before the workers could start)."""
    n = max(1, min(jobs, len(positions)))
    return [positions[i::n] for i in range(n)]


def _work(conn, share: list[int], workers: int) -> None:
    tree, vocab, unread, check_syntax = _FORKED
    try:
        found = triage(tree, share, vocab, check_syntax)
        own = found.index
        # the parent needs what triage learnt, not the bytes; the index goes to the other workers
        conn.send(("ok", (TRIAGE, replace(found, texts={}, index={}))))
        analysis = ChunkAnalysis(tree, vocab, found.texts)

        def share(outline) -> None:  # the relpath for the hand-out; the rest pickled, for the parent to pass on unread
            conn.send(("ok", (OUTLINES, ([outline.relpath], pickle.dumps([outline], protocol=pickle.HIGHEST_PROTOCOL)))))

        analysis.share = share
        conn.send(("ok", (NEXT, None)))  # answered once some worker's triage found a candidate
        # marshal: a part (bytes -> positions) is dumped and loaded in half pickle's time, and both
        # ends are this interpreter
        conn.send(("ok", (INDEX, marshal.dumps(own))))
        parts = [own]

        def keep(tag, payload) -> None:
            if tag == INDEX:
                parts.append(marshal.loads(payload))
                if len(parts) == workers:  # every share's index: name questions can be answered
                    analysis.use_index(parts, unread)
            else:
                analysis.outlines.update((o.relpath, o) for o in pickle.loads(payload))

        def next_candidate() -> int | None:
            """The parent's answer to NEXT; the others' index parts and outlines that come first are kept."""
            while (message := conn.recv())[0] != NEXT:
                keep(*message)
            return message[1]

        def catch_up() -> None:
            """Keep what the others sent so far: only index parts and outlines come between two NEXTs."""
            while conn.poll():
                keep(*conn.recv())

        analysis.catch_up = catch_up
        if workers == 1:
            analysis.use_index(parts, unread)
        while (pos := next_candidate()) is not None:
            analysis.add(pos)
            if len(parts) == workers:
                # the callers of the helpers found so far: loaded while candidates are handed out, so
                # the workers' ends (findings()) are short and even
                analysis.prepare_findings()
            # asked once the hand-out knows what this one parsed: a candidate parsed here as another's
            # caller is then analysed here too, not parsed again by a worker that asked ahead
            conn.send(("ok", (NEXT, None)))
        # The findings need every share's index (a helper's callers and definers), and take the
        # outlines sent so far.
        while len(parts) < workers or conn.poll():
            keep(*conn.recv())
        conn.send(("ok", (RESULT, analysis.finish())))
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
            import traceback  # only for this: ~2 ms a scan does without

            conn.send(("error", RuntimeError("".join(traceback.format_exception(exc)))))
        except OSError:
            pass
