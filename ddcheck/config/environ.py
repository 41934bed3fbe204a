"""The launch's environment and output around the tree's code.

* :func:`launch_environ`: for the block, ``os.environ`` is the environment the launch would start the
  server with: what ddcheck was started with plus the ``NAME=value`` words in front of the command.
  It is seen through a mapping that records which variables the tree's code looked up, so the report
  says which of them decided something (values of names that look like secrets are not repeated).
* :class:`TreeOutput`: for the block, what the tree's code prints (at import, at start-up) is
  captured, so ddcheck's report stays ddcheck's (``config --format json`` always parses).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator, MutableMapping

from ddcheck.tree.runtime import runs_from_tree

SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "KEY", "CREDENTIAL")
_PASSING = ("os.py", "_collections_abc.py", "<frozen os>", "<frozen _collections_abc>")


def _by_the_tree() -> bool:
    """The lookup is the tree's own code's (``os.environ.get``/``os.getenv`` in a tree file), not a
    library's or ddcheck's copy of the environment."""
    frame = sys._getframe(2)
    while frame is not None and (frame.f_code.co_filename.endswith(_PASSING) or frame.f_code.co_filename == __file__):
        frame = frame.f_back
    return frame is not None and runs_from_tree(frame.f_code.co_filename)


class _Watched(MutableMapping):
    """``os.environ`` as the tree reads it: every lookup recorded, writes passed through."""

    def __init__(self, real: MutableMapping):
        self.real, self.read = real, set()

    def _note(self, key) -> None:
        if _by_the_tree():
            self.read.add(key)

    def __getitem__(self, key):
        if not sys._getframe(1).f_code.co_filename.endswith(_PASSING):  # not a walk over the whole mapping
            self._note(key)
        return self.real[key]

    def __contains__(self, key) -> bool:
        self._note(key)
        return key in self.real

    def get(self, key, default=None):
        self._note(key)
        return self.real.get(key, default)

    def __setitem__(self, key, value) -> None:
        self.real[key] = value

    def __delitem__(self, key) -> None:
        del self.real[key]

    def __iter__(self) -> Iterator:
        return iter(self.real)

    def __len__(self) -> int:
        return len(self.real)

    def copy(self) -> dict:
        return dict(self.real)

    def __getattr__(self, name):  # encodekey, decodevalue...: the real mapping's
        return getattr(self.real, name)


class LaunchEnviron:
    """The environment of one launch (see :func:`launch_environ`)."""

    def __init__(self, words: dict[str, str]):
        self.words = dict(words)
        self.watched: _Watched | None = None
        self.static_read: set[str] = set()

    def for_tree(self) -> dict[str, str]:
        """The environment as a mapping for ddcheck's reading of the tree's code (its worker), lookups
        recorded like the running tree's."""
        env = self

        class _Recorded(dict):
            def __contains__(self, key) -> bool:
                env.static_read.add(key)
                return super().__contains__(key)

            def get(self, key, default=None):
                env.static_read.add(key)
                return super().get(key, default)

            def __getitem__(self, key):
                env.static_read.add(key)
                return super().__getitem__(key)

        return _Recorded({**os.environ, **self.words})

    def reported(self) -> dict[str, str]:
        """The words in front of the command, and the exported variables the tree's code read that are
        set (a secret's value masked)."""
        read = (self.watched.read if self.watched is not None else set()) | self.static_read
        out = dict(self.words)
        for name in sorted(read):
            if isinstance(name, str) and name not in out and name in os.environ:
                out[name] = "***" if any(w in name.upper() for w in SECRET_WORDS) else os.environ[name]
        return out


@contextlib.contextmanager
def launch_environ(words: dict[str, str]):
    """``os.environ`` = ddcheck's environment + the launch's ``NAME=value`` words, watched, for the block;
    put back as it was after."""
    env = LaunchEnviron(words)
    real = os.environ
    saved = {k: real.get(k) for k in words}
    real.update(words)
    env.watched = _Watched(real)
    os.environ = env.watched  # the tree's ``os.environ.get``/``os.getenv`` look it up here
    try:
        yield env
    finally:
        os.environ = real
        for k, v in saved.items():
            if v is None:
                real.pop(k, None)
            else:
                real[k] = v


class TreeOutput:
    """Captures what is printed to ``sys.stdout``/``sys.stderr`` while the block runs."""

    def __init__(self):
        self._out, self._err = io.StringIO(), io.StringIO()
        self._stack: contextlib.ExitStack | None = None

    def __enter__(self) -> "TreeOutput":
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(contextlib.redirect_stdout(self._out))
        self._stack.enter_context(contextlib.redirect_stderr(self._err))
        return self

    def __exit__(self, *exc) -> None:
        if self._stack is not None:
            self._stack.close()

    @property
    def stdout(self) -> str:
        return self._out.getvalue()

    @property
    def stderr(self) -> str:
        return self._err.getvalue()
