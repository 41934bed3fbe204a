"""The start of a patched copy (``ddcheck fix --out DIR``): the target's tree copied file by file.

Only regular files are copied. A wheel's members are read through size caps and their CRC checked
before the file is renamed into place (a corrupt, encrypted or oversized member is skipped and
reported, never half-written); member names that are absolute or climb out with ``..`` are refused.
In a directory, symlinks to regular files are copied as files; directory symlinks are not followed
(a loop, or a link out of the tree, would copy without end or copy what is not the target's);
FIFOs, sockets and devices are never opened. Everything skipped is reported with the reason. Folders
ddcheck never reads (``tree.sources.skipped_dir``: caches, environments, build output, dot-folders) are
not copied, as they are not scanned.
"""

from __future__ import annotations

import os
import shutil
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ddcheck.tree.sources import PACKAGE_VERSION_RE, member_errors, open_target, skipped_dir

MAX_FILE_BYTES = 256 << 20  # one member or file; nothing in an sglang tree comes near it
MAX_TOTAL_BYTES = 4 << 30  # the whole copy
CHUNK = 1 << 20


@dataclass
class CopyReport:
    root: Path
    copied: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    written: list[Path] = field(default_factory=list)  # every file the copy put in place


def out_state(out_dir: Path) -> str:
    """What ``out_dir`` was before a copy: "absent", "empty" or "full" (``--force``), for :func:`discard_copy`."""
    if not out_dir.exists():
        return "absent"
    return "empty" if out_dir.is_dir() and not any(out_dir.iterdir()) else "full"


def discard_copy(out_dir: Path, state: str, report: CopyReport | None) -> None:
    """Take a copy away again (it was never fixed): ``out_dir`` as it was before (``state``). A folder
    that was there with files of its own keeps them: only the files the copy wrote go."""
    if state == "absent":
        shutil.rmtree(out_dir, ignore_errors=True)
    elif state == "empty" and out_dir.is_dir():
        for child in list(out_dir.iterdir()):
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
    else:
        for path in report.written if report else ():
            path.unlink(missing_ok=True)


def copy_tree(target: str, out_dir: Path, report: CopyReport | None = None) -> CopyReport:
    """Copy the package tree of ``target`` (a directory, a file, a wheel or ``sglang==VERSION``);
    ``report`` collects what was copied as it goes (what to take away if the copy fails midway)."""
    report = report if report is not None else CopyReport(out_dir)
    if PACKAGE_VERSION_RE.match(target) or target.endswith(".whl"):
        tree = open_target(target)  # an unknown version fails before anything is made
        out_dir.mkdir(parents=True, exist_ok=True)
        _copy_wheel(Path(tree.wheel), out_dir, report)
        return report
    out_dir.mkdir(parents=True, exist_ok=True)
    src = Path(target)
    if src.is_dir():
        dest = out_dir / src.resolve().name if (src / "__init__.py").is_file() else out_dir
        _copy_dir(src, dest, report)
    else:
        _copy_file(src, out_dir / src.name, report, str(src))
    return report


def _copy_wheel(wheel: Path, out_dir: Path, report: CopyReport) -> None:
    total = 0
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            name = info.filename
            if info.is_dir():
                continue
            parts = PurePosixPath(name).parts
            if name.startswith("/") or "\\" in name or ".." in parts or (parts and ":" in parts[0]):
                report.skipped.append((name, "a member name that leaves the copy (absolute or with ..)"))
                continue
            if info.file_size > MAX_FILE_BYTES:
                report.skipped.append((name, f"{info.file_size} bytes, over the {MAX_FILE_BYTES >> 20} MiB cap"))
                continue
            if total + info.file_size > MAX_TOTAL_BYTES:
                report.skipped.append((name, f"the copy would pass {MAX_TOTAL_BYTES >> 30} GiB"))
                continue
            dest = out_dir.joinpath(*parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{dest.name}.ddcheck-copy")
            try:
                written = 0
                with zf.open(info) as fh, open(tmp, "wb") as out:
                    while chunk := fh.read(CHUNK):
                        written += len(chunk)
                        if written > info.file_size or written > MAX_FILE_BYTES:
                            raise OSError("larger than its header says")
                        out.write(chunk)
                os.replace(tmp, dest)
                report.written.append(dest)
            except (*member_errors(), OSError) as exc:
                tmp.unlink(missing_ok=True)
                report.skipped.append((name, f"corrupt or unreadable member ({type(exc).__name__}: {exc})"))
                continue
            total += written
            report.copied += 1


def _copy_dir(src: Path, dest: Path, report: CopyReport) -> None:
    for here, dirs, files in os.walk(src, followlinks=False):
        rel = Path(here).relative_to(src)
        keep = []
        for d in sorted(dirs):
            path = Path(here) / d
            if skipped_dir(d):
                continue
            if path.is_symlink():
                report.skipped.append((str(path), "a directory symlink (not followed)"))
                continue
            keep.append(d)
        dirs[:] = keep
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for name in sorted(files):
            _copy_file(Path(here) / name, dest / rel / name, report, str(Path(here) / name))


def _copy_file(src: Path, dest: Path, report: CopyReport, label: str) -> None:
    tmp = dest.with_name(f".{dest.name}.ddcheck-copy")
    try:
        # Opened without blocking and checked on the open file: a FIFO swapped in is never read.
        fd = os.open(src, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # follows a file symlink
    except OSError as exc:
        report.skipped.append((label, f"unreadable ({exc.strerror or exc})"))
        return
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            report.skipped.append((label, "not a regular file"))
            return
        if st.st_size > MAX_FILE_BYTES:
            report.skipped.append((label, f"{st.st_size} bytes, over the {MAX_FILE_BYTES >> 20} MiB cap"))
            return
        dest.parent.mkdir(parents=True, exist_ok=True)
        with os.fdopen(os.dup(fd), "rb") as fh, open(tmp, "wb") as out:
            shutil.copyfileobj(fh, out, CHUNK)
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        os.replace(tmp, dest)  # replaces a link already at dest, never writes through it
        report.written.append(dest)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        report.skipped.append((label, f"not copied ({exc.strerror or exc})"))
        return
    finally:
        os.close(fd)
    report.copied += 1
