"""Where source files come from: a file, a directory, a wheel (read as a zip), ``sglang==VER``
(downloaded once with pip into a user cache) or the installed sglang (found without importing it).

Everything downstream sees :class:`SourceFile` objects and never touches the disk or the zip itself.
"""

from __future__ import annotations

import errno
import importlib.util
import os
import re
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path, PurePosixPath
from ddcheck.tree.names import SERVER_ARGS_FILE

TYPE_CHECKING = False  # read by type checkers as typing.TYPE_CHECKING; a scan does not load typing
if TYPE_CHECKING:
    import zipfile

PACKAGE_VERSION_RE = re.compile(r"^sglang==(?P<version>[0-9][0-9A-Za-z.+\-]*)$")
# Physical lines as Python's tokenizer counts them: ended by \n, \r\n or \r only (``str.splitlines``
# also splits on form feeds, U+2028 and other separators Python allows inside a line, which would
# shift every later line number and column).
LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def split_lines(text: str) -> list[str]:
    """``text``'s physical lines, each with its line ending (see LINE_RE)."""
    return LINE_RE.findall(text)


# Directories that never hold code we scan; skipping them keeps a git checkout scan fast.
SKIPPED_DIRS = {"__pycache__", "venv", "node_modules", "build", "dist"}


def skipped_dir(name: str) -> bool:
    """A folder never read, on disk, in a wheel or in a copy: caches, environments, build output and
    every dot-folder (``.git``, ``.venv``, ``.tox``)."""
    return name in SKIPPED_DIRS or name.startswith(".")


class TargetError(Exception):
    """A target that cannot be opened at all (missing path, failed download, bad zip)."""


@dataclass(frozen=True)
class SourceFile:
    """One Python source of a target.

    ``display`` is what reports show (``WHEEL!member`` for wheel members); ``relpath`` is the
    posix path inside the tree (``sglang/srt/...`` for packages) and is what analyses key on.
    """

    display: str
    relpath: str
    _read: Callable[[], bytes] = field(repr=False, compare=False)
    disk: str | None = field(default=None, compare=False)  # the file on disk, if it is one

    def read_bytes(self) -> bytes:
        return self._read()

    @property
    def stamp(self) -> tuple[int, int, int, int] | None:
        """(size, mtime_ns, ctime_ns, inode) of a file on disk, taken when first asked (the result cache
        asks; a scan without it never stats the tree's thousands of files). None for other files."""
        # kept in the instance's dict by hand: functools.cached_property takes a lock on each first
        # access, ~7 ms over a large tree's files
        known = self.__dict__.get("_stamp", self)
        if known is not self:
            return known
        stamp = None
        if self.disk is not None:
            try:
                stamp = _stamp(os.stat(self.disk))
            except OSError:
                pass
        self.__dict__["_stamp"] = stamp
        return stamp

    @property
    def disk_path(self) -> Path | None:
        # A Path per listed file costs a scan of a large tree more than its stat does: made on demand.
        return None if self.disk is None else Path(self.disk)

    @property
    def module(self) -> str:
        """Dotted module name derived from ``relpath`` (``a/b/__init__.py`` -> ``a.b``)."""
        return module_of_relpath(self.relpath)


def module_of_relpath(r: str) -> str:
    """Dotted module name of a posix relpath (``a/b/__init__.py`` -> ``a.b``, ``a/b.py`` -> ``a.b``)."""
    # string operations, not PurePosixPath: a tree index asks this of every file of the tree
    stem = r[:-3] if r.endswith(".py") else ""
    if stem and "." not in stem and "//" not in stem and stem[0] != "/" and stem[-1] != "/":
        # nearly every file (a/b/c.py): no empty or "." parts, one suffix
        name = stem.replace("/", ".")
        return name[:-9] if name.endswith(".__init__") else "" if name == "__init__" else name
    folder, _, name = r.rstrip("/").rpartition("/")
    dot = name.rfind(".")
    if 0 < dot < len(name) - 1:  # PurePath.with_suffix("") drops the last suffix only
        name = name[:dot]
    parts = [p for p in folder.split("/") if p and p != "."]
    if name != "__init__":
        parts.append(name)
    return ".".join(parts)


# (a wheel's identity, what) -> a reading of all of its members (SourceTree.read_once): made once per process,
# whichever tree object asks (a smoke run opens the wheel anew for each of its C's)
_WHEEL_READINGS: dict[tuple, object] = {}


@dataclass
class SourceTree:
    """A scanned target: its Python files and a way to look files up by tree-relative path."""

    label: str
    kind: str  # "file" | "dir" | "wheel"
    files: list[SourceFile]
    root: Path | None = None  # directory on disk, for "dir" and "file" targets
    wheel: Path | None = None
    _relpaths: tuple[set[str], str] | None = field(default=None, repr=False, compare=False)
    _dirs: set[str] | None = field(default=None, repr=False, compare=False)
    _by_relpath: dict[str, SourceFile] | None = field(default=None, repr=False, compare=False)
    # what -> a reading of all of its files (read_once)
    _readings: dict[object, object] = field(default_factory=dict, repr=False, compare=False)

    def find(self, suffix: str) -> SourceFile | None:
        """The file whose relpath ends with ``suffix`` (posix), preferring the shortest match."""
        suffix = suffix.lstrip("/")
        hits = [f for f in self.files if f.relpath == suffix or f.relpath.endswith("/" + suffix)]
        return min(hits, key=lambda f: len(f.relpath)) if hits else None

    def read_text(self, suffix: str) -> str | None:
        f = self.find(suffix)
        return None if f is None else f.read_bytes().decode("utf-8")

    def module_file(self, fullname: str) -> tuple[str, bool] | None:
        """(relpath, is_package) of the module ``fullname`` (``sglang.srt.x``) in this tree, or None."""
        if self._relpaths is None:
            root = self.package_root(fullname.split(".")[0])
            self._relpaths = ({f.relpath for f in self.files}, f"{root}/" if root else "")
        paths, prefix = self._relpaths
        base = prefix + fullname.replace(".", "/")
        if f"{base}.py" in paths:
            return f"{base}.py", False
        if f"{base}/__init__.py" in paths:
            return f"{base}/__init__.py", True
        return None

    def namespace_dir(self, fullname: str) -> str | None:
        """The folder of ``fullname`` when the tree holds it as a namespace package (files below it,
        no ``__init__.py``), else None."""
        if self._dirs is None:
            root = self.package_root(fullname.split(".")[0])
            prefix = f"{root}/" if root else ""
            self._dirs = {"/".join(parts[:i]) for f in self.files if f.relpath.startswith(prefix)
                          for parts in [f.relpath.split("/")] for i in range(1, len(parts))}
        base = (self.package_root(fullname.split(".")[0]) or "")
        base = f"{base}/" + fullname.replace(".", "/") if base else fullname.replace(".", "/")
        return base if base in self._dirs and self.module_file(fullname) is None else None

    def module_name(self, relpath: str, package: str = "sglang") -> str:
        """The module a tree file is imported as (``python/sglang/srt/x.py`` -> ``sglang.srt.x``), the
        inverse of :meth:`module_file`; "" for a file that is no module of ``package``."""
        root = self.package_root(package)
        prefix = f"{root}/" if root else ""
        if not relpath.startswith(prefix) or not relpath.endswith(".py"):
            return ""
        name = module_of_relpath(relpath[len(prefix):])
        return name if name.split(".")[0] == package else ""

    def module_defining(self, name: str, package: str = "sglang") -> str | None:
        """The module of ``package`` that defines a top-level class or function ``name`` (the one with
        the shortest path, where several do), found in the files' text; None if none does. The files are
        read once per tree, for every name (the smoke harness asks for the same classes at every path)."""
        defining = self.read_once("defining", self._defining)
        for relpath in sorted(defining.get(name, ()), key=len):
            module = self.module_name(relpath, package)
            if module:
                return module
        return None

    def _defining(self) -> dict[str, list[str]]:
        """Top-level class or function name -> the .py files that define it, in one pass over the files."""
        pattern = re.compile(rb"^(?:class|def) (\w+)", re.MULTILINE)
        defining: dict[str, list[str]] = {}
        for f in self.files:
            if not f.relpath.endswith(".py"):
                continue
            try:
                data = f.read_bytes()
            except OSError:
                continue  # a file that cannot be read defines nothing here (the scan says why)
            for hit in dict.fromkeys(pattern.findall(data)):
                defining.setdefault(hit.decode("ascii", "replace"), []).append(f.relpath)
        return defining

    def read_once(self, what: object, make: Callable[[], object]):
        """``make()``, a reading of all of the tree's files (``what`` names it): made once per tree, and once
        per process for the trees of one wheel (:meth:`identity`), whose members are inflated on each read."""
        if what not in self._readings:
            wheel = self.identity()
            if wheel is not None and (wheel, what) in _WHEEL_READINGS:
                self._readings[what] = _WHEEL_READINGS[(wheel, what)]
            else:
                self._readings[what] = made = make()
                if wheel is not None:
                    _WHEEL_READINGS[(wheel, what)] = made
        return self._readings[what]

    def identity(self) -> tuple | None:
        """A wheel's (path, size, mtime, members): the same file for every tree opened from it in a process
        (what is read from all of its members is kept under it); None for other trees."""
        if self.kind != "wheel" or self.wheel is None:
            return None
        known = self.__dict__.get("_identity", self)
        if known is self:
            try:
                st = os.stat(self.wheel)
                # and which of its members this tree holds (a tree may be opened with fewer)
                known = (str(Path(self.wheel).resolve()), st.st_size, st.st_mtime_ns,
                         hash(tuple(f.relpath for f in self.files)))
            except OSError:
                known = None
            self.__dict__["_identity"] = known
        return known

    def file_at(self, relpath: str) -> SourceFile | None:
        """The file at exactly ``relpath``."""
        if self._by_relpath is None:
            self._by_relpath = {f.relpath: f for f in self.files}
        return self._by_relpath.get(relpath)

    def package_root(self, package: str = "sglang") -> str | None:
        """The relpath prefix under which ``package/`` lives (``""`` for a wheel), or None."""
        for f in self.files:
            parts = PurePosixPath(f.relpath).parts
            if package in parts:
                i = parts.index(package)
                if parts[i + 1 : i + 2] and f.relpath.endswith(".py"):
                    return "/".join(parts[:i])
        return None


def cache_dir() -> Path:
    """Per-user cache for downloaded wheels and the scan cache (``DDCHECK_CACHE`` overrides)."""
    env = os.environ.get("DDCHECK_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ddcheck"


def installed_sglang() -> Path | None:
    """Directory of the installed ``sglang`` package, located without importing it."""
    try:
        spec = importlib.util.find_spec("sglang")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            if Path(loc).is_dir():
                return Path(loc)
    if spec.origin and spec.origin not in ("namespace", "built-in"):
        return Path(spec.origin).parent
    return None


ABSENT_FOR_S = 600  # how long "no such release" is believed without asking the index again


def download_wheel(version: str, dest: Path | None = None) -> Path:
    """``pip download --no-deps sglang==VERSION`` into the cache, once; returns the wheel path."""
    dest = dest or cache_dir() / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    existing = _cached_wheel(dest, version)
    if existing:
        return existing
    absent = dest / f".absent-{version}"  # the index said "no such release" a short while ago
    try:
        if time.time() - absent.stat().st_mtime < ABSENT_FOR_S:
            raise TargetError(f"sglang=={version}: no such release on the package index (pip download found none)")
    except FileNotFoundError:
        pass
    base = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(dest)]
    attempts = [
        base + [f"sglang=={version}"],
        # From 0.5.12 on the wheels are tagged cp311-manylinux; on another Python or platform pip
        # would find nothing, yet the Python sources inside are what we read.
        base + ["--python-version", "3.11", "--implementation", "cp", "--platform", "manylinux_2_34_x86_64",
                "--platform", "any", f"sglang=={version}"],
    ]
    last = ""
    import subprocess  # only a download runs one; a scan of files never loads it

    for cmd in attempts:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        found = _cached_wheel(dest, version)
        if found:
            return found
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        last = last[0]
    if "No matching distribution" in last:  # pip's words for a version the index does not have
        try:  # remembered a while, so a script that asks again does not wait on the index again
            absent.touch()
        except OSError:
            pass
        raise TargetError(f"sglang=={version}: no such release on the package index (pip download found none)")
    raise TargetError(f"could not download sglang=={version}: {last}")


def _cached_wheel(dest: Path, version: str) -> Path | None:
    hits = sorted(dest.glob(f"sglang-{version}-*.whl"))
    return hits[0] if hits else None


def _stamp(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


def open_target(target: str, stamped: bool = False) -> SourceTree:
    """Open a file, directory, wheel or ``sglang==VER`` as a :class:`SourceTree`. ``stamped``: a
    directory's files are stat'ed as they are listed (the result cache asks every file's stamp)."""
    m = PACKAGE_VERSION_RE.match(target.strip())
    if m:
        wheel = download_wheel(m.group("version"))
        return _open_wheel(wheel, label=target)
    path = Path(target)
    if not path.exists():
        raise TargetError(f"{target}: no such file or directory")
    if path.is_dir():
        return _open_dir(path, stamped)
    if not path.is_file():
        raise TargetError(f"{target}: not a regular file (a FIFO, socket or device is never read)")
    if path.suffix == ".whl" or path.suffix == ".zip" and lazy_zipfile().is_zipfile(path):
        return _open_wheel(path, label=str(path))
    return SourceTree(label=str(path), kind="file", root=path.parent,
                      files=[_disk_file(path, display=printable(str(path)), relpath=printable(path.name))])


def _disk_file(path: Path, display: str, relpath: str) -> SourceFile:
    return SourceFile(display=display, relpath=relpath, _read=lambda: read_regular(path), disk=str(path))


def printable(name: str) -> str:
    """A file name as text safe to print: bytes that are not UTF-8 (held as surrogates by os) shown as
    \\xNN, and control characters (an escape sequence, a newline in a name) escaped as Python writes them,
    so a name never moves the cursor or recolours the terminal (ruff escapes them too)."""
    if name.isprintable():  # nearly every name: no round trip
        return name
    if not name.isascii():
        name = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)


def read_regular(path: Path | str) -> bytes:
    """The bytes of a regular file; anything else (a FIFO that would block, a device, a socket) is an
    OSError, so it is reported as that file's error and never read."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, socket or device is never read)")
        # os.read, not a file object: a tree scan reads thousands of files and the object costs more
        # than the read. Read on to the end: the file may have grown since its size was taken, and a
        # short read is not the end on every file system (FUSE may return less than asked).
        data, rest = os.read(fd, st.st_size + 1), []
        while more := os.read(fd, 1 << 16):
            rest.append(more)
        return data + b"".join(rest) if rest else data
    finally:
        os.close(fd)


def _open_dir(path: Path, stamped: bool = False) -> SourceTree:
    # A package directory (site-packages/sglang) keeps its own name in relpath, so module names
    # and tree lookups read the same as for a wheel or a checkout.
    # A checkout's python/sglang may lack __init__.py (a namespace package): srt/ still marks it.
    is_package = (path / "__init__.py").is_file() or (path / SERVER_ARGS_FILE.split("/", 1)[1]).is_file()
    prefix = f"{path.resolve().name}/" if is_package else ""
    files: list[SourceFile] = []
    base = str(path)
    # scandir + string joins: a 4,700-file tree is listed (and stat'ed, for the cache) in ~30 ms.
    stack = [(base, prefix)]
    while stack:
        folder, rel = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)  # in no order: the files are sorted once, at the end
        except OSError:
            continue
        subdirs = []
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if not skipped_dir(e.name):
                    subdirs.append((e.path, f"{rel}{printable(e.name)}/"))
            elif e.name.endswith(".py"):
                # Names that are not UTF-8 (legal on Linux) are read through their own path, and shown
                # and keyed escaped (\xff), so no output or cache key ever holds a lone surrogate.
                f = SourceFile(display=printable(e.path), relpath=rel + printable(e.name),
                               _read=lambda p=e.path: read_regular(p), disk=e.path)
                if stamped:
                    try:
                        f.__dict__["_stamp"] = _stamp(e.stat())
                    except OSError:  # gone since it was listed: asked again, as a file would be
                        pass
                files.append(f)
        stack.extend(reversed(subdirs))
    files.sort(key=lambda f: f.relpath)
    return SourceTree(label=str(path), kind="dir", files=files, root=path)


def lazy_zipfile():
    """The zipfile module, loaded for wheels only (~3 ms a directory scan does without)."""
    import zipfile

    return zipfile


def _open_wheel(wheel: Path, label: str) -> SourceTree:
    try:
        zf = _zip(wheel)
    except (lazy_zipfile().BadZipFile, OSError) as exc:
        raise TargetError(f"{wheel}: not a readable wheel ({exc})") from exc
    files = []
    for info in zf.infolist():
        if info.is_dir() or not info.filename.endswith(".py") \
                or any(skipped_dir(part) for part in info.filename.split("/")[:-1]):
            continue
        member = info.filename
        # named as the user named the wheel (``sglang==0.5.10!sglang/...``, as smoke names it), not by its
        # place in ddcheck's cache; a wheel given by path keeps that path
        files.append(SourceFile(display=printable(f"{label}!{member}"), relpath=printable(member),
                                _read=_member_reader(wheel, member)))
    return SourceTree(label=label, kind="wheel", files=files, wheel=wheel)


_ZIPS: dict[tuple[int, str], zipfile.ZipFile] = {}


def _zip(path: Path) -> zipfile.ZipFile:
    # One handle per process: scan workers are forked, and a shared file offset would race.
    key = (os.getpid(), str(path))
    if key not in _ZIPS:
        _ZIPS[key] = lazy_zipfile().ZipFile(path)
    return _ZIPS[key]


MAX_SOURCE_BYTES = 64 << 20  # no Python source of a real tree comes near this


def member_errors() -> tuple[type[BaseException], ...]:
    """What reading a bad archive member raises: CRC mismatch, encryption, unsupported compression,
    truncation."""
    import zlib

    return lazy_zipfile().BadZipFile, RuntimeError, NotImplementedError, EOFError, zlib.error


def _member_reader(wheel: Path, member: str) -> Callable[[], bytes]:
    def read() -> bytes:
        """A member's bytes, or an OSError naming what is wrong with it (that file's error)."""
        zf = _zip(wheel)
        info = zf.getinfo(member)
        if info.file_size > MAX_SOURCE_BYTES:
            raise OSError(errno.EFBIG, f"member of {info.file_size} bytes, over the {MAX_SOURCE_BYTES >> 20} MiB cap")
        try:
            with zf.open(info) as fh:
                data = fh.read(MAX_SOURCE_BYTES + 1)
        except member_errors() as exc:
            raise OSError(errno.EIO, f"corrupt archive member ({type(exc).__name__}: {exc})") from exc
        if len(data) > MAX_SOURCE_BYTES:
            raise OSError(errno.EFBIG, f"member larger than its header says, over the {MAX_SOURCE_BYTES >> 20} MiB cap")
        return data

    return read


def content_hash(data: bytes) -> str:
    return blake2b(data, digest_size=16).hexdigest()


def blake2b(data: bytes = b"", *, digest_size: int):
    """A BLAKE2b hash object, from CPython's own ``_blake2`` (what ``hashlib.blake2b`` is): importing
    hashlib loads OpenSSL's bindings first, which costs a repeat scan more than its hashing."""
    return _blake2b()(data, digest_size=digest_size)


@lru_cache(maxsize=1)
def _blake2b():
    try:
        from _blake2 import blake2b
    except ImportError:  # a Python built without its own BLAKE2
        from hashlib import blake2b
    return blake2b
