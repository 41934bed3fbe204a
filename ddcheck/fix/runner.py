"""Running ``ddcheck fix`` over targets: plan every file's fix from one scan (files whose fixes go
together, together), re-scan what the fix would write, write atomically; and the entry points tests,
smoke and ``ddcheck config`` use. Every file fixed, rolled back or skipped carries its reason.
"""

from __future__ import annotations

import difflib
import errno
import os
import stat
from collections import Counter, defaultdict
from pathlib import Path

from pydantic import BaseModel, Field

from ddcheck.tree.parse import SourceError, check_compiles, decode
from ddcheck.tree.files import replace
from ddcheck.base.findings import Edit, Finding, FixSafety, ScanResult, Severity
from ddcheck.scan.settings import Settings
from ddcheck.tree.sources import SourceTree, TargetError, open_target, split_lines
from ddcheck.fix.transform import FixError, rewrite


class FileFix(BaseModel):
    """One file's fix: its bytes before and after, and the findings it removes."""

    display: str
    relpath: str
    before: bytes = Field(repr=False)
    after: bytes = Field(repr=False)
    fixed: list[Finding]
    # other files this fix changes together with (a helper's new parameter and its callers' keyword):
    # applied all together or not at all
    linked: list[str] = Field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        """A unified diff of the text, each side decoded as Python reads it (its PEP 263 coding line, a
        BOM) and split into lines as Python's tokenizer counts them."""
        a, b = split_lines(decode(self.before)), split_lines(decode(self.after))
        return "".join(difflib.unified_diff(a, b, f"a/{self.relpath}", f"b/{self.relpath}"))


def fixable(findings: list[Finding], unsafe: bool) -> list[Finding]:
    # Info findings are fallbacks, left alone; a width resolver's `return C` is the exception (unsafe).
    return [f for f in findings if f.fix is not None and (f.fix.safety is FixSafety.safe or unsafe)
            and (f.severity != Severity.info or f.resolver)]


# -- planning over targets -------------------------------------------------------------------------


def plan(trees: list[SourceTree], settings: Settings, unsafe: bool,
         only: set[str] | None = None) -> tuple[list[FileFix], ScanResult]:
    """Scan the trees (only the relpaths in ``only``, when given) and compute the fixed bytes of
    every file with fixable findings."""
    from ddcheck.scan.api import scan_trees_with_settings

    result = scan_trees_with_settings(trees, settings, only=only)
    files = {f.display: f for t in trees for f in t.files}
    tree_of = {f.display: t for t in trees for f in t.files}
    by_rel = {(id(t), f.relpath): f.display for t in trees for f in t.files}
    by_file: dict[str, list[Finding]] = defaultdict(list)
    foreign: dict[str, list[Edit]] = defaultdict(list)  # edits other files' fixes make in this file
    group = _Groups()
    missing: dict[str, str] = {}
    for f in fixable(result.findings, unsafe):
        by_file[f.path].append(f)
        group.add(f.path)
        for e in f.fix.edits:
            if e.path and e.path != f.relpath:
                tree = tree_of.get(f.path)
                other = by_rel.get((id(tree), e.path)) if tree is not None else None
                if other is None:
                    missing[f.path] = e.path
                    continue
                foreign[other].append(e)
                group.join(f.path, other)
    made: dict[str, FileFix] = {}
    failed: dict[str, str] = dict((d, f"the fix also changes {rel}, which is not among the files fixed")
                                  for d, rel in missing.items())
    for display in sorted(set(by_file) | set(foreign)):
        items, extra = by_file.get(display, []), foreign.get(display, [])
        src = files.get(display)
        if src is None:
            # A helper module reached from a target (pre-commit passes single files): not ours to edit.
            failed[display] = (f"{len(items)} finding(s) in this helper of the targets; pass it to `ddcheck fix` "
                               f"too")
            continue
        before = src.read_bytes()
        try:
            after = rewrite(before, items, extra)
        except FixError as exc:  # the transform says why (a libcst parse error included)
            failed[display] = str(exc)
            continue
        made[display] = FileFix(display=display, relpath=src.relpath, before=before, after=after, fixed=items)
    fixes = []
    for display, fx in made.items():
        members = group.members(display)
        broken = [m for m in members if m in failed]
        if broken:  # a helper's new parameter without its callers' keyword (or the reverse): none of it
            result.errors.append(_err(display, f"fix not applied: it goes with the fix of {broken[0]}, which "
                                               f"could not be made ({failed[broken[0]]})"))
            continue
        fx.linked = sorted(m for m in members if m != display)
        fixes.append(fx)
    for display, why in failed.items():
        result.errors.append(_err(display, f"fix not applied: {why}"))
    return fixes, result


class _Groups:
    """Files whose fixes must be applied together (union-find over display paths)."""

    def __init__(self):
        self.parent: dict[str, str] = {}

    def add(self, a: str) -> str:
        self.parent.setdefault(a, a)
        while self.parent[a] != a:
            a = self.parent[a]
        return a

    def join(self, a: str, b: str) -> None:
        self.parent[self.add(a)] = self.add(b)

    def members(self, a: str) -> list[str]:
        root = self.add(a)
        return [m for m in list(self.parent) if self.add(m) == root]


def verify_fixes(fixes: list[FileFix], trees: list[SourceTree], settings: Settings,
                 before: ScanResult) -> list[tuple[FileFix, str]]:
    """Re-parse and re-scan each fixed file in its tree; a fix that does not parse or leaves an
    error where it claimed one (more errors in a function than it had minus those fixed) is rejected."""
    from ddcheck.scan.api import scan_trees_with_settings

    rejected = []
    for fx in fixes:
        try:
            check_compiles(fx.after, fx.display)
        except SourceError as exc:
            cause = exc.__cause__
            rejected.append((fx, f"the fixed file does not parse ({cause.msg}, line {cause.lineno})"
                             if isinstance(cause, SyntaxError) else "the fixed file is nested too deeply for Python to compile"))
            continue
        tree = next(t for t in trees if any(f.display == fx.display for f in t.files))
        patched = _patched_tree(tree, fixes)
        after = scan_trees_with_settings([patched], settings, only={fx.relpath})
        fixed_functions = Counter(f.function for f in fx.fixed if f.severity == Severity.error)
        left = Counter(f.function for f in after.findings if f.path == fx.display and f.severity == Severity.error
                       and f.function in fixed_functions)
        before_counts = Counter(f.function for f in before.findings if f.path == fx.display
                                and f.severity == Severity.error)
        for func, n in fixed_functions.items():
            if left[func] > before_counts[func] - n:
                rejected.append((fx, f"an error is left in `{func}` after the fix"))
                break
    out = {fx.display for fx, _ in rejected}
    for fx in fixes:  # fixes made together are rolled back together
        gone = next((d for d in fx.linked if d in out), None)
        if gone is not None and fx.display not in out:
            rejected.append((fx, f"it goes with the fix of {gone}, which was rolled back"))
    return rejected


def _patched_tree(tree: SourceTree, fixes: list[FileFix]) -> SourceTree:
    from ddcheck.tree.sources import SourceFile

    after = {fx.display: fx.after for fx in fixes}
    files = [SourceFile(f.display, f.relpath, (lambda data=after[f.display]: data), f.disk)
             if f.display in after else f for f in tree.files]
    # Only the fixed file and what it imports matter for its re-scan.
    return SourceTree(label=tree.label, kind=tree.kind, files=files, root=tree.root, wheel=tree.wheel)


def _err(path: str, message: str):
    from ddcheck.base.findings import FileError

    return FileError(path=path, message=message)


# -- writing ----------------------------------------------------------------------------------------


def write_atomic(path: Path, data: bytes, expected_before: bytes | None) -> None:
    """Replace ``path`` with ``data`` via a temp file + rename (:func:`ddcheck.tree.files.replace`, fsynced),
    keeping its mode; refuses when the file changed on disk since it was read (checked again just before
    the rename). A symlink is followed: its target is fixed in place and the link stays a link."""
    path = Path(os.path.realpath(path))
    if expected_before is not None and path.read_bytes() != expected_before:
        raise FixError(f"{path} changed on disk since it was read; not written")
    st = path.stat() if path.exists() else None
    mode = stat.S_IMODE(st.st_mode) if st else 0o644
    # The rename would replace a read-only file whatever its mode says (and root may write any file):
    # as ruff and black do, a file nobody may write is refused, not rewritten.
    if st is not None and not mode & 0o222:
        raise PermissionError(errno.EACCES, f"read-only file (mode {mode:04o})", str(path))

    def unchanged() -> None:
        if expected_before is not None and (path.read_bytes() != expected_before or _identity(path) != _identity_of(st)):
            raise FixError(f"{path} changed on disk while it was being fixed; not written")

    replace(path, data, mode=mode, durable=True, before_rename=unchanged)


def _identity(path: Path) -> tuple:
    return _identity_of(path.stat())


def _identity_of(st) -> tuple:
    return (st.st_ino, st.st_size, st.st_mtime_ns) if st is not None else ()


# -- API used by tests, smoke and config --------------------------------------------------------------


def fix_targets(targets: list[str], *, settings: Settings | None = None, unsafe: bool = False,
                write: bool = True) -> list[FileFix]:
    """Fix files/directories in place (``write``) and return what changed."""
    from ddcheck.scan.api import open_targets

    settings = settings or Settings()
    trees, _ = open_targets(targets)
    fixes, result = plan(trees, settings, unsafe)
    rejected = {id(fx) for fx, _ in verify_fixes(fixes, trees, settings, result)}
    good = [fx for fx in fixes if fx.changed and id(fx) not in rejected]
    if write:
        for fx in good:
            write_atomic(Path(_disk(trees, fx)), fx.after, fx.before)
    return good


def fix_tree(target: str, out_dir: Path, *, unsafe: bool = False) -> list[FileFix]:
    """Write a patched copy of the package tree of ``target`` (dir, wheel, sglang==VER) to ``out_dir``."""
    from ddcheck.fix.copying import copy_tree

    copy_tree(target, Path(out_dir))
    return fix_targets([str(out_dir)], unsafe=unsafe)


def fixed_file_text(target: str, relpath: str, *, unsafe: bool = False) -> str:
    """The fixed text of one file of a target tree (the unchanged text when nothing needs fixing),
    checked as `ddcheck fix` checks what it writes; raises FixError when that check rejects it."""
    tree = open_target(target)
    f = tree.find(relpath)
    if f is None:
        raise TargetError(f"{relpath} is not in {target}")
    settings = Settings()
    fixes, result = plan([tree], settings, unsafe, only={f.relpath})
    for fx in fixes:
        if fx.display == f.display:
            if fx.linked:
                raise FixError(f"{fx.display}: its fix also changes {', '.join(fx.linked)}; "
                               f"use `ddcheck fix --out` to get every file")
            rejected = verify_fixes([fx], [tree], settings, result)
            if rejected:
                raise FixError(f"{fx.display}: fix rolled back: {rejected[0][1]}")
            return decode(fx.after)
    return decode(f.read_bytes())


def _disk(trees: list[SourceTree], fx: FileFix) -> Path:
    for t in trees:
        for f in t.files:
            if f.display == fx.display and f.disk_path is not None:
                return f.disk_path
    raise FixError(f"{fx.display} is not a file on disk (use --out for wheels)")
