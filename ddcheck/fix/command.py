"""``ddcheck fix``, the command: targets in, diffs or written files out, what was not fixed and why."""

from __future__ import annotations

import base64
import csv
import hashlib
import shutil
import zipfile
from pathlib import Path

from ddcheck.base.errors import EXIT_CLEAN, EXIT_FINDINGS, EXIT_NOT_JUDGED, EXIT_USAGE, verdict
from ddcheck.base.findings import Finding, Severity
from ddcheck.scan.settings import Settings
from ddcheck.tree.names import TRITON_BACKEND_FILE
from ddcheck.tree.sources import PACKAGE_VERSION_RE, SourceTree, TargetError, installed_sglang, printable, read_regular
from ddcheck.fix.runner import _disk, plan, verify_fixes, write_atomic
from ddcheck.fix.transform import FixError

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
    """The command's exit code by the one contract: 0 fixed (or nothing to fix) and, with --verify, the
    fixed tree passes the smoke test; 1 fixes pending (--check), a fix not made or not written, a
    finding left unfixed; 2 usage or a target that cannot be obtained; 3 --verify could not run."""
    from rich.markup import escape

    dry = diff or check  # writes nothing, so any target will do: a wheel, sglang==X, and --out is moot
    if installed:
        pkg = installed_sglang()
        if pkg is None:
            err.print("ddcheck: no installed sglang found")
            return EXIT_USAGE
        targets = [str(pkg)]
    if out_dir is not None:
        if len(targets) != 1:
            err.print("ddcheck: --out takes exactly one target")
            return EXIT_USAGE
        if dry:
            err.print(f"[dim]ddcheck: --{'diff' if diff else 'check'} writes nothing: --out "
                      f"{escape(str(out_dir))} is not written[/dim]")
        else:
            return _fix_into(targets[0], out_dir, force, settings=settings, unsafe=unsafe,
                             exit_non_zero_on_fix=exit_non_zero_on_fix, verify=verify, console=console, err=err)
    elif not dry:
        for t in targets:
            if PACKAGE_VERSION_RE.match(t) or t.endswith(".whl"):
                err.print(f"ddcheck: {t} is read-only; fix it into a copy with --out DIR (or look with --diff/--check)")
                return EXIT_USAGE
    return _fix(targets, settings=settings, diff=diff, check=check, unsafe=unsafe, installed=installed,
                exit_non_zero_on_fix=exit_non_zero_on_fix, verify=verify, console=console, err=err)


def _fix_into(target: str, out_dir: Path, force: bool, **kw) -> int:
    """``--out``: a copy of the target's tree, fixed. A copy the fix never got to write (the copy or the
    target failed, an internal error, Ctrl-C) is taken away again: no unpatched tree is left that looks
    like a fixed one."""
    from rich.markup import escape

    from ddcheck.fix.copying import CopyReport, copy_tree, discard_copy, out_state

    err = kw["err"]
    problem = _out_problem(Path(target), out_dir, force)
    if problem:
        err.print(f"ddcheck: --out {escape(str(out_dir))}: {problem}")
        return EXIT_USAGE
    state = out_state(out_dir)
    written = [False]
    copied = CopyReport(out_dir)
    try:
        copy_tree(target, out_dir, copied)
        for path, why in copied.skipped:
            err.print(f"[yellow]ddcheck: not copied to {escape(str(out_dir))}: {escape(path)}: {escape(why)}[/yellow]")
        return _fix([str(out_dir)], not_copied=bool(copied.skipped), written=written, **kw)
    except (TargetError, OSError, zipfile.BadZipFile) as exc:
        err.print(f"ddcheck: {escape(str(exc))}")
        return EXIT_USAGE
    finally:
        if not written[0]:
            discard_copy(out_dir, state, copied)


def _fix(targets, *, settings: Settings, diff: bool = False, check: bool = False, unsafe: bool,
         installed: bool = False, exit_non_zero_on_fix: bool, verify: bool, console, err,
         not_copied: bool = False, written: list | None = None) -> int:
    """Fix ``targets`` in place (or, ``diff``/``check``, say what would change); ``not_copied``: files of
    the target that --out could not copy (reported); ``written[0]`` is set once the writing is done."""
    from rich.markup import escape

    from ddcheck.scan.api import named_or_fail, open_targets

    trees, open_errors = open_targets(targets)
    named_or_fail(trees, open_errors)  # a UsageError: exit 2, said once
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
        return verdict(bool((check and pending) or result.errors or rejected), False)
    done, failed = [], []
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
            done.append((fx, path))
        except (FixError, OSError) as exc:  # not written (changed on disk, read-only, ...): never a success
            failed.append(fx)
            err.print(f"[red]{escape(fx.display)}: not written: {escape(str(exc))}[/red]")
    if written is not None:
        written[0] = True
    for fx, path in done:
        if fx.fixed:
            console.print(f"fixed {len(fx.fixed)} in {escape(printable(str(path)))}")
        else:  # only the edits another file's fix needs here
            console.print(f"updated {escape(printable(str(path)))}: passes the verify width to the fixed "
                          f"{escape(', '.join(fx.linked))}")
    if installed and done:
        console.print("Backups were written next to each file; to restore:")
        for _, path in done:
            console.print(f"  mv {path}{BACKUP_SUFFIX} {path}")
    remaining = [f for f in result.findings if f.severity == Severity.error and not any(
        f in fx.fixed for fx, _ in done)]
    _report_unfixable([f for f in remaining if f.fix is None], console)
    bad = bool(failed or rejected or result.errors or not_copied or any(f.fix is None for f in remaining)
               or (exit_non_zero_on_fix and done))
    if verify:
        smoked = _verify_with_smoke(trees[0], console, err)
        if smoked == EXIT_USAGE:
            return smoked
        # the smoke's bug is a finding; a smoke that could not run is 3, unless findings win
        return verdict(bad or smoked == EXIT_FINDINGS, smoked == EXIT_NOT_JUDGED)
    return verdict(bad, False)


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
    """Run the smoke test on the tree as it is now on disk (fixed): 0 it passes, 1 it does not, 3 it
    could not run (nothing was judged: never "does not pass"), 2 a tree --verify cannot take."""
    from ddcheck.smoke import smoke_main  # imports no torch: a smoke without it reports that, exit 3

    if tree.kind != "dir" or tree.find(TRITON_BACKEND_FILE) is None:
        err.print("ddcheck: --verify needs an sglang tree with a Triton backend (a directory, or --out DIR)")
        return EXIT_USAGE
    console.print("running `ddcheck smoke` on the fixed tree...")
    code = smoke_main(str(tree.root), fmt="text", console=console)
    if code == EXIT_FINDINGS:
        err.print("[red]the fixed tree does not pass the smoke test; not reporting success[/red]")
    elif code != EXIT_CLEAN:
        err.print(f"[magenta]--verify: the smoke test could not run (exit {code}); the fix is written but not "
                  f"verified[/magenta]")
    return code
