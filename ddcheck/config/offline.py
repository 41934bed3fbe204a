"""The config child process runs the tree's code offline (unless ``--allow-downloads``).

Two layers, both only in the child process (:mod:`ddcheck.config.child`):

* :data:`OFFLINE_ENV`, set in the worker's environment from its start: the Hugging Face libraries read
  these when they are imported and then neither download nor retry (``hf_hub_download`` answers from
  the cache, ``file_exists`` is not asked);
* :class:`NetGuard`: every other way out (a ``socket.connect`` to a network address, a DNS lookup) fails
  at once instead of waiting on DNS or a timeout. Each refusal is recorded with the code lines on the
  stack, and raises an error of its own class (:class:`Refused`, :class:`RefusedLookup`): what the tree
  logs while it handles an error that one caused (``retry() failed once... Will delay``, ``Failed to
  load hf_quant_config.json``) is its talk about its own downloads (:func:`about_a_refusal`), not a
  finding, and a wait there (the retry's ``time.sleep``) is skipped.
"""

from __future__ import annotations

import errno
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any

# What the Hugging Face libraries (huggingface_hub, transformers, datasets) read to stay offline.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
ALLOW_FLAG = "--allow-downloads"
WHY = f"ddcheck config runs the tree's code offline (pass {ALLOW_FLAG} to let it download)"
LOCAL_FAMILIES = tuple(f for f in (getattr(socket, "AF_UNIX", None),) if f is not None)


def offline_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the libraries told to stay offline."""
    return {**env, **OFFLINE_ENV}


class Refused(ConnectionRefusedError):
    """A connection the guard refused."""


class RefusedLookup(socket.gaierror):
    """A DNS lookup the guard refused."""


@dataclass
class Attempt:
    """One way out the guard refused."""

    what: str  # "connect", "getaddrinfo"
    address: str  # "huggingface.co:443"
    stack: tuple[tuple[str, int], ...] = field(default=(), repr=False)  # (file, line) on the stack, innermost first


class NetGuard:
    """``socket.socket.connect``/``connect_ex`` to a network address and ``socket.getaddrinfo`` raise at
    once while installed (local sockets, ``AF_UNIX``, still connect); every refusal is recorded. A
    ``time.sleep`` called while an error a refusal caused is handled (a retry's back-off) returns at once."""

    def __init__(self) -> None:
        self.attempts: list[Attempt] = []
        self.waits_skipped = 0  # the tree's waits (``time.sleep``) while it handled a refusal: skipped
        self.set_by_ddcheck: set[str] = set()  # the OFFLINE_ENV names the caller's environment did not set so
        self._saved: list[tuple[Any, str, Any]] = []

    @property
    def installed(self) -> bool:
        return bool(self._saved)

    def install(self) -> None:
        if self.installed:
            return
        guard = self
        connect, connect_ex, getaddrinfo = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo

        def refused_connect(sock, address):
            if sock.family in LOCAL_FAMILIES:
                return connect(sock, address)
            raise Refused(errno.ECONNREFUSED, guard.refuse("connect", address))

        def refused_connect_ex(sock, address):
            if sock.family in LOCAL_FAMILIES:
                return connect_ex(sock, address)
            guard.refuse("connect", address)
            return errno.ECONNREFUSED

        def refused_getaddrinfo(host, port, *args, **kwargs):
            raise RefusedLookup(socket.EAI_NONAME, guard.refuse("getaddrinfo", (host, port)))

        def sleep(seconds):
            if about_a_refusal(sys.exc_info()[1]):  # a retry's wait after a refusal: nothing to wait for
                guard.waits_skipped += 1
                return None
            return real_sleep(seconds)

        real_sleep = time.sleep
        self._saved = [(socket.socket, "connect", connect), (socket.socket, "connect_ex", connect_ex),
                       (socket, "getaddrinfo", getaddrinfo), (time, "sleep", real_sleep)]
        socket.socket.connect, socket.socket.connect_ex = refused_connect, refused_connect_ex
        socket.getaddrinfo = refused_getaddrinfo
        time.sleep = sleep

    def uninstall(self) -> None:
        for owner, name, value in reversed(self._saved):
            setattr(owner, name, value)
        self._saved = []

    def refuse(self, what: str, address) -> str:
        stack, f = [], sys._getframe(2)
        while f is not None:
            stack.append((f.f_code.co_filename, f.f_lineno))
            f = f.f_back
        host, port = (address[0], address[1]) if isinstance(address, tuple) and len(address) >= 2 else (address, None)
        where = f"{host}:{port}" if port is not None else str(host)
        self.attempts.append(Attempt(what, where, tuple(stack)))
        return f"{what} {where} refused: {WHY}"


def about_a_refusal(exc: BaseException | None) -> bool:
    """``exc`` (the error being handled) was caused by a refusal of the guard, directly or through the
    errors raised while handling it (``raise X from e``, a raise in an ``except`` block)."""
    todo, seen = [exc], set()
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        if isinstance(e, (Refused, RefusedLookup)):
            return True
        seen.add(id(e))
        todo += [e.__cause__, e.__context__]
    return False


GUARD = NetGuard()
