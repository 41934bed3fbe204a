"""``ddcheck fix``, the command: targets in, diffs or written files out, what was not fixed and why."""

from __future__ import annotations

import base64
import csv
import hashlib
import shutil
import zipfile
from pathlib import Path

from ..findings import Finding, Severity
from ..settings import Settings
from ..target.sources import PACKAGE_VERSION_RE, SourceTree, TargetError, installed_sglang, printable, read_regular
from .runner import _disk, plan, verify_fixes, write_atomic
from .transform import FixError

BACKUP_SUFFIX = ".ddcheck-orig"


def _installed_record(pkg: Path) -> dict[str, str]:
    """relpath -> the ``sha256=`` hash pip recorded for each file of the installed sglang at ``pkg``
    (its ``*.dist-info/RECORD`` next to it; read, never imported); {} when there is none."""
    for dist in sorted(pkg.parent.glob("sglang-*.dist-info")):
        try:  # a regular file only (a FIFO there would block), text pip wrote: else no record
            lines = read_regular(dist / "RECORD").decode("utf-8").splitlines()
        except (OSError, ValueError):
            continue
        rows = {row[0]: row[1] for row in csv.reader(lines) if len(row) >= 2 and row[1].startswith("sha256=")}
        if f"{pkg.name}/__init__.py" in rows:
            return rows
    return {}


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


# -- the command ----------------------------------------------------------------------------------------


def fix_main(targets, *, settings: Settings, diff: bool, check: bool, unsafe: bool, out_dir: Path | None,
             installed: bool, exit_non_zero_on_fix: bool, verify: bool, console, err, force: bool = False) -> int:
    from rich.markup import escape

    from ..api import open_targets

    not_copied = False  # --out: a file of the target that could not be copied (reported)
    if installed:
        pkg = installed_sglang()
        if pkg is None:
            err.print("ddcheck: no installed sglang found")
            return 2
        targets = [str(pkg)]
    if out_dir is not None:
        if len(targets) != 1:
            err.print("ddcheck: --out takes exactly one target")
            return 2
        problem = _out_problem(Path(targets[0]), out_dir, force)
        if problem:
            err.print(f"ddcheck: --out {escape(str(out_dir))}: {problem}")
            return 2
        from ..copying import copy_tree

        try:
            copied = copy_tree(targets[0], out_dir)
        except (TargetError, OSError, zipfile.BadZipFile) as exc:
            err.print(f"ddcheck: {escape(str(exc))}")
            return 2
        for path, why in copied.skipped:
            err.print(f"[yellow]ddcheck: not copied to {escape(str(out_dir))}: {escape(path)}: {escape(why)}[/yellow]")
        not_copied = bool(copied.skipped)
        targets = [str(out_dir)]
    else:
        for t in targets:
            if PACKAGE_VERSION_RE.match(t) or t.endswith(".whl"):
                err.print(f"ddcheck: {t} is read-only; fix it into a copy with --out DIR")
                return 2
    trees, open_errors = open_targets(targets)
    for e in open_errors:
        err.print(f"ddcheck: {escape(e.path)}: {escape(e.message)}")
    if open_errors:
        return 2
    fixes, result = plan(trees, settings, unsafe)
    rejected = dict((id(fx), why) for fx, why in verify_fixes(fixes, trees, settings, result))
    for e in result.errors:
        err.print(f"[magenta]{escape(e.path)}[/magenta]: {escape(e.message)}")
    pending = [fx for fx in fixes if fx.changed and id(fx) not in rejected]
    for fx in fixes:
        if id(fx) in rejected:
            err.print(f"[red]{escape(fx.display)}: fix rolled back: {escape(rejected[id(fx)])}[/red]")
    if diff or check:
        for fx in pending:
            console.file.write(fx.diff()) if diff else console.print(f"would fix {len(fx.fixed)} in {escape(fx.display)}")
        unfixable = [f for f in result.findings if f.severity == Severity.error and f.fix is None]
        _report_unfixable(unfixable, console)
        # --check fails on pending fixes; both fail when a fix could not be made or was rolled back.
        return 1 if (check and pending) or result.errors or rejected or not_copied else 0
    written, failed = [], []
    shipped = _installed_record(Path(targets[0])) if installed else {}
    for fx in pending:
        path = _disk(trees, fx)
        try:
            if installed:
                backup = path.with_name(path.name + BACKUP_SUFFIX)
                # The original is the file as pip installed it (its RECORD hash): it replaces an older
                # backup (after an sglang upgrade); a file changed since (an earlier fix, a hand edit)
                # keeps the backup there is, and is backed up only when there is none.
                if not backup.exists() or shipped.get(fx.relpath) == _record_hash(fx.before):
                    shutil.copy2(path, backup)
            write_atomic(path, fx.after, fx.before)
            written.append((fx, path))
        except (FixError, OSError) as exc:  # not written (changed on disk, read-only, ...): never a success
            failed.append(fx)
            err.print(f"[red]{escape(fx.display)}: not written: {escape(str(exc))}[/red]")
    for fx, path in written:
        if fx.fixed:
            console.print(f"fixed {len(fx.fixed)} in {escape(printable(str(path)))}")
        else:  # only the edits another file's fix needs here
            console.print(f"updated {escape(printable(str(path)))}: passes the verify width to the fixed "
                          f"{escape(', '.join(fx.linked))}")
    if installed and written:
        console.print("Backups were written next to each file; to restore:")
        for _, path in written:
            console.print(f"  mv {path}{BACKUP_SUFFIX} {path}")
    remaining = [f for f in result.findings if f.severity == Severity.error and not any(
        f in fx.fixed for fx, _ in written)]
    _report_unfixable([f for f in remaining if f.fix is None], console)
    if verify:
        code = _verify_with_smoke(trees[0], console, err)
        if code != 0:
            return code
    if exit_non_zero_on_fix and written:
        return 1
    if failed or rejected or result.errors or not_copied or any(f.fix is None for f in remaining):
        return 1
    return 0


def _out_problem(source: Path, out_dir: Path, force: bool) -> str:
    """Why a patched copy may not go to ``out_dir`` (empty when it may)."""
    out = out_dir.resolve()
    if source.exists():
        src = source.resolve()
        if out == src or src in out.parents:
            return "is inside the target it would copy (the copy would copy itself)"
    if out.exists() and not out.is_dir():
        return "exists and is not a directory"
    if out.is_dir() and any(out.iterdir()) and not force:
        return "is not empty (its files would be overwritten by the copy); pass --force to write into it"
    return ""


def _report_unfixable(findings: list[Finding], console) -> None:
    from rich.markup import escape

    for f in findings:
        console.print(f"[yellow]not fixed[/yellow] {escape(f.path)}:{f.line}:{f.column + 1} {f.rule}: {escape(f.hint or '')}")


def _verify_with_smoke(tree: SourceTree, console, err) -> int:
    """Run the smoke test on the tree as it is now on disk (fixed); success only if it passes."""
    try:
        from ..smoke import smoke_main
    except ImportError as exc:
        err.print(f"ddcheck: --verify needs the smoke test's torch and triton ({exc})")
        return 2
    if tree.kind != "dir" or tree.find("srt/layers/attention/triton_backend.py") is None:
        err.print("ddcheck: --verify needs an sglang tree with a Triton backend (a directory, or --out DIR)")
        return 2
    console.print("running `ddcheck smoke` on the fixed tree...")
    code = smoke_main(str(tree.root), fmt="text")
    if code != 0:
        err.print("[red]the fixed tree does not pass the smoke test; not reporting success[/red]")
    return code
