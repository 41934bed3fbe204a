"""``ddcheck fix``: rewrite the verify-path reads of C that ``scan`` found to the per-step width.

The scan's model says where each verify block starts (the fix's anchor) and how the verify input is
spelled there; the fixer binds ``num_tokens_per_req = <W, falling back to C>`` once at that anchor
and replaces every fixable read in the block with the local. libcst keeps every other byte as it
was (comments, quotes, CRLF, tabs, encoding). Writes are atomic, re-checked by a re-scan, and a
file that changed on disk since it was read is left alone.
"""

from __future__ import annotations

import ast
import difflib
import os
import re
import shutil
import stat
import tempfile
import zipfile
from collections import Counter, defaultdict
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider
from pydantic import BaseModel, Field

from .analysis.module import LINE_RE, SourceError, decode, encoding_of, statement_lines
from .analysis.vocabulary import FIX_LOCAL as LOCAL
from .findings import Edit, Finding, FixSafety, ScanResult, Severity
from .settings import Settings
from .sources import PACKAGE_VERSION_RE, SourceTree, TargetError, installed_sglang, open_target, printable

BACKUP_SUFFIX = ".ddcheck-orig"


class FixError(Exception):
    """A fix that could not be applied to one file (reported; the file is left as it was)."""


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
        a = self.before.decode("utf-8").splitlines(keepends=True)
        b = self.after.decode("utf-8").splitlines(keepends=True)
        return "".join(difflib.unified_diff(a, b, f"a/{self.relpath}", f"b/{self.relpath}"))


def fixable(findings: list[Finding], unsafe: bool) -> list[Finding]:
    # Info findings are fallbacks, left alone; a width resolver's `return C` is the exception (unsafe).
    return [f for f in findings if f.fix is not None and (f.fix.safety is FixSafety.safe or unsafe)
            and (f.severity != Severity.info or f.resolver)]


# -- rewriting one file ---------------------------------------------------------------------------


def rewrite(source: bytes, findings: list[Finding], extra: list[Edit] = ()) -> bytes:
    """Apply the fixes of ``findings`` (all of one file) and the ``extra`` edits other files' fixes
    make here to ``source``; raises FixError.

    Only the top-level statements (classes, functions) that hold a fix go through libcst; the rest
    of the file is kept as its bytes are. That keeps a fix to one function of a 20 MB file (or next
    to a megabyte literal) as fast as in a small one, and every other byte untouched by construction.
    """
    try:
        encoding = encoding_of(source)
        text = decode(source)
    except SourceError as exc:
        raise FixError(str(exc)) from exc
    lines = LINE_RE.findall(text)
    findings = [f.model_copy(update={"fix": f.fix.model_copy(update={
        "edits": [e for e in f.fix.edits if not e.path or e.path == f.relpath]})}) for f in findings]
    spans = _top_level_spans(text, findings, bool(extra))
    groups: dict[int, list[Finding]] = defaultdict(list)
    extras: dict[int, list[Edit]] = defaultdict(list)

    def span_of(at: list[int]) -> int | None:
        return next((i for i, (a, b) in enumerate(spans) if a <= min(at) and max(at) <= b), None)

    for f in findings:
        at = [f.line, f.end_line] + ([f.fix.anchor_line] if f.fix.anchor_line else []) + \
            [n for e in f.fix.edits for n in (e.line, e.end_line or e.line)]
        index = span_of(at)
        if index is None:
            raise FixError(f"{f.line}:{f.column + 1}: `{f.symbol}` is not inside one statement of the file")
        groups[index].append(f)
    for e in extra:
        index = span_of([e.line, e.end_line or e.line])
        if index is None:
            raise FixError(f"{e.line}:{e.column + 1}: the `{e.name}` edit is not inside one statement of the file")
        extras[index].append(e)
    out_lines = list(lines)
    for index in sorted(set(groups) | set(extras), reverse=True):  # from the end: earlier lines stay valid
        first, last = spans[index]
        shift = first - 1
        segment = "".join(lines[first - 1:last])
        moved = [f.model_copy(update={"line": f.line - shift, "end_line": f.end_line - shift,
                                      "fix": f.fix.model_copy(update={
                                          "anchor_line": f.fix.anchor_line - shift if f.fix.anchor_line else 0,
                                          "edits": [e.model_copy(update={
                                              "line": e.line - shift,
                                              "end_line": e.end_line - shift if e.end_line else 0})
                                              for e in f.fix.edits]})})
                 for f in groups[index]]
        here = [e.model_copy(update={"line": e.line - shift, "end_line": e.end_line - shift if e.end_line else 0})
                for e in extras[index]]
        new = _rewrite_text(segment, moved, text, here)
        if segment.endswith(("\r", "\n")) and not new.endswith(("\r", "\n")):
            new += segment[-2:] if segment.endswith("\r\n") else segment[-1]  # libcst drops a bare CR's
        out_lines[first - 1:last] = [new]
    out_text = "".join(out_lines)
    try:
        if encoding == "utf-8-sig":
            return b"\xef\xbb\xbf" + out_text.encode("utf-8")
        return out_text.encode(encoding)
    except UnicodeEncodeError as exc:
        raise FixError(f"the fixed text does not encode as {encoding}: {exc}") from exc


def _top_level_spans(text: str, findings: list[Finding], parse: bool = False) -> list[list[int]]:
    """[first, last] lines of the top-level statements, merged where they share a line. The analysis
    gives each fix its statement's span; only a finding without one (or ``parse``: edits other files'
    fixes make here) costs a parse of the file."""
    given = [[f.fix.block_first, f.fix.block_last] for f in findings if f.fix.block_first]
    if len(given) == len(findings) and not parse:
        raw = sorted(given)
    else:  # a plan made without spans (not by this version's analysis): find them
        try:
            raw = [list(statement_lines(s)) for s in ast.parse(text).body]
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            raise FixError(f"does not parse: {exc}") from exc
    spans: list[list[int]] = []
    for first, last in raw:
        if spans and first <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], last)
        else:
            spans.append([first, last])
    return spans


def _rewrite_text(text: str, findings: list[Finding], whole: str, extra: list[Edit] = ()) -> str:
    """The fixes applied to ``text`` (top-level statements of the file, positions relative to it), and
    the ``extra`` edits of other files' fixes; ``whole`` is the file's full text, for names chosen at
    module level."""
    module = cst.parse_module(text)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    parents = wrapper.resolve(ParentNodeProvider)
    by_span: dict[tuple[int, int, int, int], cst.CSTNode] = {}
    block_stmts: list[tuple[cst.CSTNode, tuple, tuple]] = []  # statements directly in a body
    for node, rng in positions.items():
        if isinstance(node, (cst.Attribute, cst.Name)):
            by_span.setdefault((rng.start.line, rng.start.column, rng.end.line, rng.end.column), node)
        elif isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) \
                and isinstance(parents.get(node), (cst.IndentedBlock, cst.Module)):
            block_stmts.append((node, (rng.start.line, rng.start.column), (rng.end.line, rng.end.column)))

    replace: dict[cst.CSTNode, cst.BaseExpression] = {}
    bind: dict[cst.CSTNode, list[tuple[str, str]]] = defaultdict(list)  # anchor statement -> bindings
    taken: dict[cst.CSTNode, set[str]] = defaultdict(set)
    # reading statement -> {buffer: (W local, "arange" | "fill")}
    refills: dict[cst.CSTNode, dict[str, tuple[str, str]]] = defaultdict(dict)
    groups: dict[tuple[int, int, str], list[Finding]] = defaultdict(list)
    for f in findings:
        groups[(f.fix.anchor_line, f.fix.anchor_column, f.fix.expression)].append(f)
    for (line, col, expression), group in groups.items():
        if line == 0:  # verify-guarded conditional expression: replaced inline
            for f in group:
                if f.fix.replace_site:
                    replace[_site(by_span, f)] = cst.parse_expression(f"({expression})")
            continue
        anchor = _block_statement(block_stmts, (line, col))
        if anchor is None:
            raise FixError(f"no statement at {line}:{col + 1} to bind the per-step width at")
        func = _enclosing_function(parents, anchor)
        local = _free_name(module.code_for_node(func) if func is not None else whole, taken[func])
        taken[func].add(local)
        bind[anchor].append((local, expression))
        for f in group:
            if f.fix.replace_site:
                replace[_site(by_span, f)] = cst.Name(local)
            for e in f.fix.edits:
                if e.kind == "refill":
                    reader = _block_statement(block_stmts, (e.line, e.column))
                    if reader is None:
                        raise FixError(f"{e.line}:{e.column + 1}: no statement to refill `{e.value}` before")
                    refills[reader].setdefault(e.value, (local, e.name))
    params, keywords = _edits(findings, positions, extra)
    rewriter = _Rewriter(replace, bind, params, keywords, refills)
    new = wrapper.module.visit(rewriter)
    if rewriter.inserted != set(bind):
        raise FixError("the per-step width could not be bound at the top of every verify block")
    if rewriter.edited != set(params) | set(keywords):
        raise FixError("a function or call the fix threads the width through is not where the scan saw it")
    return new.code


def _edits(findings: list[Finding], positions, extra: list[Edit] = ()) -> tuple[dict, dict]:
    """The fixes' edits, by the libcst node they change: {FunctionDef: {names}}, {Call: {name: value}}."""
    wanted = {(e.kind, e.line, e.column, e.end_line, e.end_column, e.name, e.value)
              for e in [*(e for f in findings for e in f.fix.edits), *extra] if e.kind != "refill"}
    if not wanted:
        return {}, {}
    defs, calls = {}, {}
    for node, rng in positions.items():
        if isinstance(node, cst.FunctionDef):
            at = positions[node.name].start
            defs[(at.line, at.column)] = node
        elif isinstance(node, cst.Call):
            calls[(rng.start.line, rng.start.column, rng.end.line, rng.end.column)] = node
    params: dict[cst.CSTNode, set[str]] = defaultdict(set)
    keywords: dict[cst.CSTNode, dict[str, str]] = defaultdict(dict)
    for kind, line, col, end_line, end_col, name, value in wanted:
        if kind == "add_parameter":
            node = defs.get((line, col))
            if node is None:
                raise FixError(f"{line}:{col + 1}: no function starts here to take `{name}`")
            params[node].add(name)
        else:
            node = calls.get((line, col, end_line, end_col))
            if node is None:
                raise FixError(f"{line}:{col + 1}: no call here to pass `{name}` to")
            if keywords[node].setdefault(name, value) != value:
                raise FixError(f"{line}:{col + 1}: two different widths for `{name}` in one call")
    return dict(params), dict(keywords)


def _site(by_span, f: Finding) -> cst.CSTNode:
    node = by_span.get((f.line, f.column, f.end_line, f.end_column))
    if node is None:
        raise FixError(f"{f.line}:{f.column + 1}: `{f.symbol}` is not where the scan saw it")
    return node


def _block_statement(block_stmts, pos: tuple[int, int]) -> cst.CSTNode | None:
    """The innermost statement of a block (body) that starts at or encloses ``pos``: the anchor
    itself normally; the whole ``if`` when the verify block is an ``elif`` or a one-line body."""
    around = [(start, end, node) for node, start, end in block_stmts if start <= pos <= end]
    return max(around, key=lambda t: t[0])[2] if around else None


def _enclosing_function(parents, node: cst.CSTNode) -> cst.FunctionDef | None:
    while node in parents:
        node = parents[node]
        if isinstance(node, cst.FunctionDef):
            return node
    return None


def _free_name(code: str, taken: set[str]) -> str:
    """``num_tokens_per_req`` unless the function already uses that name for something else."""
    for name in (LOCAL, f"verify_{LOCAL}", *(f"{LOCAL}_{i}" for i in range(2, 100))):
        if name not in taken and not re.search(rf"(?<![\w.]){re.escape(name)}\b", code):
            return name
    raise FixError("no free name for the per-step width")


class _Rewriter(cst.CSTTransformer):
    def __init__(self, replace, bind, params=None, keywords=None, refills=None):
        self.replace = replace
        self.bind = bind
        self.refills = refills or {}
        self.params, self.keywords = params or {}, keywords or {}
        self.inserted: set[cst.CSTNode] = set()
        self.edited: set[cst.CSTNode] = set()

    def leave_FunctionDef(self, original, updated):
        names = self.params.get(original)
        if not names:
            return updated
        self.edited.add(original)
        p = updated.params
        tight = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
        for n in sorted(names):
            new = cst.Param(name=cst.Name(n), default=cst.Name("None"), equal=tight)
            if p.star_kwarg is not None:  # before **kwargs: one more item followed by a comma
                new = new.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                key = "kwonly_params" if p.star_arg is not cst.MaybeSentinel.DEFAULT else "params"
                p = p.with_changes(**{key: [*getattr(p, key), new]})
            elif p.kwonly_params or isinstance(p.star_arg, cst.Param):  # after *args: keyword-only
                if p.kwonly_params:
                    p = p.with_changes(kwonly_params=_append(p.kwonly_params, new, "whitespace_after_param"))
                else:
                    star = p.star_arg
                    p = p.with_changes(star_arg=star.with_changes(
                        comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
                        whitespace_after_param=cst.SimpleWhitespace("")),
                        kwonly_params=[new.with_changes(whitespace_after_param=star.whitespace_after_param)])
            else:
                p = p.with_changes(params=_append(p.params, new, "whitespace_after_param"))
        return updated.with_changes(params=p)

    def leave_Call(self, original, updated):
        names = self.keywords.get(original)
        if not names:
            return updated
        self.edited.add(original)
        tight = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
        args = list(updated.args)
        for n, v in sorted(names.items()):
            args = _append(args, cst.Arg(keyword=cst.Name(n), value=cst.parse_expression(v), equal=tight),
                           "whitespace_after_arg")
        return updated.with_changes(args=args)

    def leave_Attribute(self, original, updated):
        return self.replace.get(original, updated)

    def leave_Name(self, original, updated):
        return self.replace.get(original, updated)

    def _with_bindings(self, original, updated):
        if not any(s in self.bind or s in self.refills for s in original.body):
            return updated
        body = []
        for orig, upd in zip(original.body, updated.body):
            for local, expr in self.bind.get(orig, ()):
                body.append(cst.parse_statement(
                    f"# Per-step verify width; C only if the verify input has none (ddcheck fix).\n"
                    f"{local} = {expr}\n"))
                self.inserted.add(orig)
            for buffer, (local, how) in self.refills.get(orig, {}).items():
                if how == "fill":
                    body.append(cst.parse_statement(
                        f"# Filled with C at start-up: refilled with this step's width (ddcheck fix).\n"
                        f"{buffer}.fill_({local})\n"))
                    continue
                body.append(cst.parse_statement(
                    f"# Laid out stepping by C at start-up: refilled stepping by this step's width (ddcheck fix).\n"
                    f"{buffer}.copy_(torch.arange({buffer}.numel(), dtype={buffer}.dtype, device={buffer}.device)"
                    f" * {local})\n"))
            body.append(upd)
        return updated.with_changes(body=body)

    leave_IndentedBlock = _with_bindings
    leave_Module = _with_bindings


def _append(items, new, closing_attr: str) -> list:
    """``items`` (parameters or arguments) with ``new`` last, laid out as the list is: the separator
    of the items before it, and the whitespace that closed the list (or its trailing comma) kept at
    the end. ``closing_attr``: where an item without a trailing comma keeps the whitespace before ``)``."""
    items = list(items)
    if not items:
        return [new]
    last = items[-1]
    before = items[-2].comma if len(items) > 1 else cst.MaybeSentinel.DEFAULT
    sep = before.whitespace_after if isinstance(before, cst.Comma) else cst.SimpleWhitespace(" ")
    if isinstance(last.comma, cst.Comma):  # a trailing comma: the new item gets one, and the closing space
        items[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=sep))
        return items + [new.with_changes(comma=cst.Comma(whitespace_after=last.comma.whitespace_after))]
    items[-1] = last.with_changes(comma=cst.Comma(whitespace_after=sep), **{closing_attr: cst.SimpleWhitespace("")})
    return items + [new.with_changes(**{closing_attr: getattr(last, closing_attr)})]


# -- planning over targets -------------------------------------------------------------------------


def plan(trees: list[SourceTree], settings: Settings, unsafe: bool,
         only: set[str] | None = None) -> tuple[list[FileFix], ScanResult]:
    """Scan the trees (only the relpaths in ``only``, when given) and compute the fixed bytes of
    every file with fixable findings."""
    from .api import scan_trees_with_settings

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
        except (FixError, cst.ParserSyntaxError) as exc:
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
    from .api import scan_trees_with_settings

    rejected = []
    for fx in fixes:
        try:
            compile(fx.after, fx.display, "exec", dont_inherit=True)
        except SyntaxError as exc:
            rejected.append((fx, f"the fixed file does not parse ({exc.msg}, line {exc.lineno})"))
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
    from .sources import SourceFile

    after = {fx.display: fx.after for fx in fixes}
    files = [SourceFile(f.display, f.relpath, (lambda data=after[f.display]: data), f.disk_path)
             if f.display in after else f for f in tree.files]
    # Only the fixed file and what it imports matter for its re-scan.
    return SourceTree(label=tree.label, kind=tree.kind, files=files, root=tree.root, wheel=tree.wheel)


def _err(path: str, message: str):
    from .findings import FileError

    return FileError(path=path, message=message)


# -- writing ----------------------------------------------------------------------------------------


def write_atomic(path: Path, data: bytes, expected_before: bytes | None) -> None:
    """Replace ``path`` with ``data`` via a temp file + rename, keeping its mode; refuses when the
    file changed on disk since it was read (checked again just before the rename). A symlink is
    followed: its target is fixed in place and the link stays a link."""
    path = Path(os.path.realpath(path))
    if expected_before is not None and path.read_bytes() != expected_before:
        raise FixError(f"{path} changed on disk since it was read; not written")
    st = path.stat() if path.exists() else None
    mode = stat.S_IMODE(st.st_mode) if st else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".ddcheck-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        if expected_before is not None and (path.read_bytes() != expected_before or _identity(path) != _identity_of(st)):
            raise FixError(f"{path} changed on disk while it was being fixed; not written")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _identity(path: Path) -> tuple:
    return _identity_of(path.stat())


def _identity_of(st) -> tuple:
    return (st.st_ino, st.st_size, st.st_mtime_ns) if st is not None else ()


# -- API used by tests, smoke and config --------------------------------------------------------------


def fix_targets(targets: list[str], *, settings: Settings | None = None, unsafe: bool = False,
                write: bool = True) -> list[FileFix]:
    """Fix files/directories in place (``write``) and return what changed."""
    from .api import open_targets

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
    from .copying import copy_tree

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


# -- the command ----------------------------------------------------------------------------------------


def fix_main(targets, *, settings: Settings, diff: bool, check: bool, unsafe: bool, out_dir: Path | None,
             installed: bool, exit_non_zero_on_fix: bool, verify: bool, console, err, force: bool = False) -> int:
    from rich.markup import escape

    from .api import open_targets

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
        from .copying import copy_tree

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
    for fx in pending:
        path = _disk(trees, fx)
        try:
            if installed:
                backup = path.with_name(path.name + BACKUP_SUFFIX)
                # Keep the backup of an earlier run only while the file still carries that run's fix;
                # after an sglang upgrade the current file is the original to keep.
                if not backup.exists() or b"(ddcheck fix)" not in fx.before:
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
        from .smoke import smoke_main
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
