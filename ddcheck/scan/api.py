"""The Python API behind the command line: ``scan``, target resolution and the default target."""

from __future__ import annotations

from pathlib import Path

from ddcheck.scan import cache
from ddcheck.diagnostics import suppressions
from ddcheck.base.errors import UsageError
from ddcheck.base.findings import FileError, ScanResult
from ddcheck.scan.settings import Settings, load_settings
from ddcheck.tree.sources import SourceTree, TargetError, installed_sglang, open_target


def demo_dir() -> Path:
    """The bundled demo (``fixtures/demo``), scanned when no sglang is installed."""
    try:
        from importlib import resources

        return Path(str(resources.files("ddcheck._fixtures"))) / "demo"
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "fixtures" / "demo"


def default_targets() -> tuple[list[str], str]:
    """The installed sglang (located, not imported), or the demo with a note saying so."""
    pkg = installed_sglang()
    if pkg is not None:
        return [str(pkg)], f"scanning the installed sglang at {pkg}"
    return [str(demo_dir())], ("sglang is not installed here: scanning the bundled demo in fixtures/demo "
                               "(pass a path, a wheel or sglang==VERSION to scan a real tree)")


def open_targets(targets: list[str], stamped: bool = False) -> tuple[list[SourceTree], list[FileError]]:
    trees, errors = [], []
    for t in targets:
        try:
            trees.append(open_target(t, stamped))
        except TargetError as exc:
            errors.append(FileError(path=t, message=str(exc)))
    return trees, errors


def named_or_fail(trees: list[SourceTree], open_errors: list[FileError]) -> None:
    """A target the user named that cannot be obtained is a usage error (exit 2): one that does not
    open (a missing path, an unknown version) or holds no Python file to judge."""
    if open_errors:
        e = open_errors[0]
        raise UsageError(e.message if e.path in e.message else f"{e.path}: {e.message}")
    for t in trees:
        if not t.files:
            raise UsageError(f"{t.label}: no Python files to check")


def scan(targets: list[str] | None = None, *, settings: Settings | None = None, use_cache: bool = True,
         quoted: bool = True, strict: bool = False) -> ScanResult:
    """Scan files, directories, wheels or ``sglang==VER`` targets; None scans the default target.

    Suppression comments and ``select``/``ignore`` are applied; targets that cannot be opened are
    reported in ``errors`` or, with ``strict`` (the command line), raised as a UsageError, as is a
    named directory or wheel with no Python file. ``quoted=False``: a result answered from the cache
    may come without ``sources`` (the source lines the text report quotes).
    """
    notes = []
    if not targets:
        targets, note = default_targets()
        notes.append(note)
    if settings is None:
        settings = load_settings(Path(targets[0]) if Path(targets[0]).exists() else Path.cwd())
    trees, open_errors = open_targets(targets, stamped=use_cache)
    if strict:
        named_or_fail(trees, open_errors)
    k = cache.key(trees, settings.key()) if use_cache and not open_errors else None
    result = cache.load(k, sources=quoted) if k else None
    if result is None:
        result = scan_trees_with_settings(trees, settings)
        # A read error can go away with no change to the file's size or mtime (permissions): not kept.
        if k and not any(e.message.startswith("cannot be read") for e in result.errors):
            cache.store(k, result)
    result.errors[:0] = open_errors
    result.notes = notes
    return result


def scan_trees_with_settings(trees: list[SourceTree], settings: Settings, only: set[str] | None = None,
                             jobs: int | None = None) -> ScanResult:
    """The raw scan with the user's rule selection and suppression comments applied."""
    from ddcheck.analysis.scan import scan_trees  # not needed when the result cache answers

    result = scan_trees(trees, settings.vocabulary(), settings.wants_path, only=only, jobs=jobs,
                        check_syntax=settings.check_syntax)
    # Suppressions first: a comment for a rule the user deselected is still in use, not stale.
    result.findings = [f for f in suppressions.apply(result.findings, result.suppressions, result.displays)
                       if settings.wants(f)]
    result.findings.sort(key=lambda f: (f.path, f.line, f.column, f.rule))
    return result
