"""Room to recurse. The analyses walk syntax trees recursively (``ast.unparse``, visitors, ``every_node``),
and a file Python accepts may nest one expression ~3,000 deep (a 2,900-term sum, a chain of
subscripts): Python's parser allows three times the recursion limit. :func:`run` gives a walk of such a
tree a thread with a large stack and a limit to match; :func:`python_limit` parses at Python's own limit,
so a file is accepted exactly when ``python`` accepts it (the ground floor: imports nothing of ddcheck).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import contextmanager

PYTHON_LIMIT = sys.getrecursionlimit()  # what ``python file.py`` compiles under (1,000 unless changed)
# Frames per level of nesting: a dozen at most for ddcheck's walks (unparse takes three, a visitor two
# or three, a generator's ``yield from`` one): 3 x PYTHON_LIMIT levels fit in DEEP_LIMIT.
DEEP_LIMIT = 40 * PYTHON_LIMIT
# A frame that goes through C (a generator resumed, a call from a C function) takes C stack too: 512 MiB
# of address space, of which only the pages a deep file touches are ever committed.
STACK_BYTES = 512 << 20


def run(fn: Callable[..., object], *args, **kwargs):
    """``fn(*args, **kwargs)`` in a thread with a large stack and the recursion limit raised to
    DEEP_LIMIT (where it is lower), its result returned and its exception raised here. Already inside
    such a thread, or where no thread can be made, ``fn`` runs here."""
    import threading

    if getattr(_local(), "deep", False) or sys.getrecursionlimit() >= DEEP_LIMIT:
        return fn(*args, **kwargs)
    box: dict = {}

    def body() -> None:
        _local().deep = True
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            box["error"] = exc

    try:
        old_stack = threading.stack_size(STACK_BYTES)
    except (ValueError, RuntimeError):  # a platform that cannot size a thread's stack
        return fn(*args, **kwargs)
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(DEEP_LIMIT)  # before the start: the limit is the interpreter's, not the thread's
    try:
        worker = threading.Thread(target=body, name="ddcheck-deep", daemon=True)
        worker.start()
    except RuntimeError:  # no room for the stack (ulimit -v): the walks get the caller's room only
        sys.setrecursionlimit(old_limit)
        return fn(*args, **kwargs)
    finally:
        threading.stack_size(old_stack)
    try:
        worker.join()
    finally:
        if sys.getrecursionlimit() == DEEP_LIMIT:  # unless fn set its own
            sys.setrecursionlimit(old_limit)
    if "error" in box:
        raise box["error"]
    return box["value"]


@contextmanager
def python_limit():
    """Parse or compile under the limit ``python`` compiles a file with, counted from here: the
    parser's depth bound scales with the limit less the frames already used (Python 3.11), so a file
    is accepted when ``python file.py`` accepts it, however deep the caller or raised the limit (to within
    a few levels at the bound of about 3,000, where one frame, three levels, decides; an attribute chain
    2,995 deep is analysed, and Python's compiler refuses it)."""
    raised = sys.getrecursionlimit()
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    sys.setrecursionlimit(PYTHON_LIMIT + depth)
    try:
        yield
    finally:
        sys.setrecursionlimit(raised)


_LOCAL = None


def _local():
    global _LOCAL
    if _LOCAL is None:
        import threading

        _LOCAL = threading.local()
    return _LOCAL
