"""Forked workers and the channels to them: a pair of pipes per worker carrying pickled objects, each
behind its length. What a scan needs of ``multiprocessing`` (fork, a duplex pipe, wait on several),
without the ~10 ms it costs a scan to import it."""

from __future__ import annotations

import os
import pickle
import select
import struct
from collections.abc import Callable

HEADER = struct.Struct("!Q")


class Channel:
    """One end of a parent-worker link: ``send`` pickles whole before writing (an object that cannot
    be pickled leaves nothing half-sent); ``recv`` raises EOFError once the other end has gone."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd

    def send(self, obj) -> None:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        self._write(HEADER.pack(len(data)))
        self._write(data)

    def recv(self):
        (size,) = HEADER.unpack(self._read(HEADER.size))
        return pickle.loads(self._read(size))

    def poll(self) -> bool:
        """Whether a message (or the other end's close) is waiting to be read."""
        return bool(wait([self], timeout=0))

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.read_fd = self.write_fd = -1

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.write_fd, view):]

    def _read(self, size: int) -> bytearray:
        buf = bytearray(size)
        view, got = memoryview(buf), 0
        while got < size:
            n = os.readv(self.read_fd, [view[got:]])
            if not n:
                raise EOFError("the other end of the channel has gone")
            got += n
        return buf


def wait(channels: list[Channel], timeout: float | None = None) -> list[Channel]:
    """The channels with something to read (a message, or the other end closed)."""
    poller = select.poll()
    for c in channels:
        poller.register(c.read_fd, select.POLLIN)
    ready = {fd for fd, _ in poller.poll(None if timeout is None else int(timeout * 1000))}
    return [c for c in channels if c.read_fd in ready]


class Worker:
    """A forked process running ``target(channel, *args)``; it ends with ``os._exit`` (status 1 if
    the target raised), never returning into the code that forked it."""

    def __init__(self, target: Callable, args: tuple, others: list[Channel] = ()) -> None:
        down_r, down_w = _pipe()
        up_r, up_w = _pipe()
        try:
            self.pid = os.fork()
        except OSError:  # no process to be had (limits, memory): the caller scans in this process
            for fd in (down_r, down_w, up_r, up_w):
                os.close(fd)
            raise
        if self.pid == 0:  # the worker
            status = 1
            try:
                os.close(down_w)
                os.close(up_r)
                for c in others:  # the links to workers forked before: theirs alone
                    c.close()
                target(Channel(down_r, up_w), *args)
                status = 0
            finally:
                os._exit(status)
        os.close(down_r)
        os.close(up_w)
        self.channel = Channel(up_r, down_w)

    def kill(self) -> None:
        try:
            import signal  # only to stop a scan half-way

            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def join(self) -> None:
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def _pipe() -> tuple[int, int]:
    """A pipe with room for a megabyte where Linux allows it: an index part (~1 MB) then crosses in
    one write instead of sixteen, each a wake-up of the reader."""
    r, w = os.pipe()
    try:
        import fcntl

        fcntl.fcntl(w, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (ImportError, OSError):
        pass  # not Linux, or over /proc/sys/fs/pipe-max-size: the default size works too
    return r, w


def can_fork() -> bool:
    return hasattr(os, "fork") and hasattr(select, "poll") and hasattr(os, "readv")
