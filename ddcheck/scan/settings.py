"""``[tool.ddcheck]`` in ``pyproject.toml``, found upwards from the target like Ruff does."""

from __future__ import annotations

import fnmatch
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from ddcheck.analysis.vocabulary import DEFAULT_VOCABULARY, Vocabulary
from ddcheck.base.findings import Finding, Severity
from ddcheck.tree.sources import read_regular


class SettingsError(Exception):
    """Invalid configuration; the message names the file and the key."""


@dataclass
class Settings:
    """What ``[tool.ddcheck]`` can set (keys spelled with ``-``: ``fail-on``; ``_`` is accepted too).
    A plain dataclass: a table read from a file is validated by pydantic in :func:`load_settings`,
    so a scan without one never loads it."""

    # pydantic reads this when it validates a table: unknown keys (`source` among them) are errors
    __pydantic_config__ = {"extra": "forbid"}

    select: list[str] | None = field(default=None, metadata={"doc": "Rule ids to report (default: all)."})
    ignore: list[str] = field(default_factory=list, metadata={"doc": "Rule ids never to report."})
    fail_on: Severity = field(default=Severity.error, metadata={"doc": "Lowest severity that fails the run."})
    c_attributes: list[str] = field(default_factory=list, metadata={
        "doc": "Extra attribute names that hold the start-up width C (self.X)."})
    per_step_attributes: list[str] = field(default_factory=list, metadata={
        "doc": "Extra attribute names that carry the per-step width W."})
    verify_functions: list[str] = field(default_factory=list, metadata={
        "doc": "Extra substrings of function names whose body is the verify path."})
    include: list[str] = field(default_factory=list, metadata={"doc": "Glob patterns a file must match to be scanned."})
    exclude: list[str] = field(default_factory=list, metadata={"doc": "Glob patterns of files never scanned."})
    check_syntax: bool = field(default=False, metadata={
        "doc": "Parse every file, and list those that are not valid Python as skipped."})
    # Where the settings came from: set by load_settings, not a field (no key of the table sets it).
    source = None

    def __post_init__(self) -> None:
        # rule ids are matched upper-case, as `--select dd001` is (unknown ids: load_settings, the CLI)
        for name in ("select", "ignore"):
            value = getattr(self, name)
            if value and all(isinstance(v, str) for v in value):
                setattr(self, name, [v.upper() for v in value])

    @staticmethod
    def keys() -> list[str]:
        """The table's keys as users write them."""
        return [f.name.replace("_", "-") for f in fields(Settings)]

    def key(self) -> str:
        """Everything that decides a scan's result, for the result cache (include/exclude are
        relative to ``source``)."""
        return f"{json.dumps(asdict(self), sort_keys=True, default=str)}\0{self.source}"

    def vocabulary(self) -> Vocabulary:
        base = DEFAULT_VOCABULARY
        return Vocabulary(
            c_source_attrs=base.c_source_attrs,
            per_step_attrs=base.per_step_attrs | frozenset(self.per_step_attributes),
            verify_function_markers=base.verify_function_markers + tuple(self.verify_functions),
            extra_c_attrs=frozenset(self.c_attributes),
        )

    def wants(self, finding: Finding) -> bool:
        from ddcheck.diagnostics.selection import wants

        return wants(finding, self.select, self.ignore)

    def wants_path(self, relpath: str, disk_path: Path | str | None = None) -> bool:
        """``include``/``exclude`` glob patterns (``*`` also crosses ``/``), matched against the
        path inside the scanned tree and, for files on disk, against the path relative to the
        directory of the ``pyproject.toml`` the settings came from (as Ruff does), so the same
        pattern works for ``ddcheck scan .`` and for the single files pre-commit passes."""
        if not self.include and not self.exclude:
            return True
        names = self._match_names(relpath, disk_path)
        if self.include and not any(fnmatch.fnmatch(n, p) for n in names for p in self.include):
            return False
        return not any(fnmatch.fnmatch(n, p) for n in names for p in self.exclude)

    def _match_names(self, relpath: str, disk_path: Path | str | None) -> list[str]:
        names = [relpath]
        if disk_path is not None and self.source is not None:
            try:
                rel = Path(disk_path).resolve().relative_to(self.source.resolve().parent).as_posix()
            except (ValueError, OSError):
                rel = None
            if rel and rel not in names:
                names.append(rel)
        return names


def may_hold_table(text: str) -> bool:
    """Whether TOML ``text`` can hold a ``tool.ddcheck`` table at all: every spelling of the key has
    the word in it, bare or quoted, except a basic string that writes a letter as an escape."""
    return "ddcheck" in text or "\\u" in text or "\\U" in text


def find_pyproject(start: Path) -> Path | None:
    start = start.resolve()
    for folder in [start, *start.parents] if start.is_dir() else [start.parent, *start.parent.parents]:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            try:
                text = candidate.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            if not may_hold_table(text):
                # the project's own pyproject.toml, found above each file pre-commit passes: not parsed
                # (loading the TOML reader takes a one-file scan several ms)
                continue
            import tomllib

            try:
                data = tomllib.loads(text)
            except tomllib.TOMLDecodeError:
                if "tool.ddcheck" in text:  # ours and broken: load_settings reports it (exit 2)
                    return candidate
                continue
            tool = data.get("tool")
            if "ddcheck" in tool if isinstance(tool, dict) else tool is not None:
                return candidate  # ours, or a `tool` that is no table: load_settings says so (exit 2)
    return None


def load_settings(start: Path | None = None, config_file: Path | None = None) -> Settings:
    """Settings from ``config_file`` or the nearest ``pyproject.toml`` with a ``[tool.ddcheck]`` table."""
    path = config_file or find_pyproject(start or Path.cwd())
    if path is None:
        return Settings()
    import tomllib

    try:
        data = tomllib.loads(read_regular(Path(path)).decode("utf-8"))
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{path}: cannot read configuration: {exc}") from exc
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise SettingsError(f"{path}: tool: not a table (a [tool.ddcheck] table is looked for under it)")
    table = tool.get("ddcheck", data if config_file and path.name != "pyproject.toml" else {})
    settings = _validate(table, path)
    settings.source = path
    return settings


def _validate(table: object, path: Path) -> Settings:
    """The table as Settings, or a SettingsError naming each bad key as ``tool.ddcheck.<key>``."""
    if not isinstance(table, dict):
        raise SettingsError(f"{path}: tool.ddcheck: not a table")
    if not table:
        return Settings()
    from pydantic import TypeAdapter, ValidationError

    try:
        settings = TypeAdapter(Settings).validate_python({str(k).replace("-", "_"): v for k, v in table.items()})
    except ValidationError as exc:
        # "tool.ddcheck.<key>", not "[tool.ddcheck] <key>": square brackets are markup to rich.
        problems = "; ".join(f"tool.ddcheck.{'.'.join(str(x).replace('_', '-') for x in e['loc']) or '<table>'}: "
                             f"{e['msg']}" for e in exc.errors())
        raise SettingsError(f"{path}: {problems}") from exc
    from ddcheck.rules import all_rules

    for name in ("select", "ignore"):
        value = getattr(settings, name)
        unknown = [v for v in value or [] if v.upper() not in all_rules()]
        if unknown:
            raise SettingsError(f"{path}: tool.ddcheck.{name}: unknown rule id(s): {', '.join(unknown)}")
    return settings
