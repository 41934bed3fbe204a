"""Rule metadata, read from the declarative definitions under ``rules/`` (shipped as ``ddcheck._rules``).

This module owns the rule definitions, and keeps them read as JSON (:func:`all_rules`, through
:func:`ddcheck.tree.files.kept`). A rule owns its findings' words too, as a Ruff violation owns its message:
the analysis gathers a finding's facts and names its case, the rule's ``[messages]`` and ``[hints]``
templates say it (:meth:`Rule.message`, :meth:`Rule.hint`), and its ``[what]`` table what the read of C
does there (:meth:`Rule.describe`). It imports only the ground floor
(:mod:`ddcheck.base.findings`, :mod:`ddcheck.tree.files`): :mod:`ddcheck.diagnostics.suppressions` and :mod:`ddcheck.scan.cache`
stand above it.

A rule is one unit, its folder (``rules/<ID>/``, or a folder of a ``DDCHECK_RULE_PATH`` root): its
``rule.toml`` (words, docs), its examples and, where the rule has code, its ``rule.py``, one
:class:`ScanRule` subclass that says which of the analysis's kinds of hazard are its findings, re-judges
reads of C by the facts the analysis offers (:meth:`ScanRule.judge`) and says how to fix them
(:meth:`ScanRule.hint`), as a Fixit ``LintRule`` does. The registry finds the folders; there is no table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from collections import namedtuple

from ddcheck.base.findings import Evidence, Finding, Severity


@dataclass(frozen=True)
class Rule:
    """One rule's definition (``rules/<id>/rule.toml`` with its examples); a key the definition does not
    know, or one it lacks, is a TypeError when the rules are loaded."""

    id: str
    name: str
    severity: Severity
    fix: str
    summary: str
    what_it_does: str
    why_bad: str
    fix_text: str
    bad_example: str = ""
    good_example: str = ""
    # good.py is exactly what `ddcheck fix --unsafe-fixes` makes of bad.py (its `# expect:` markers
    # dropped), unless the rule says why not
    good_is_fix: bool = True
    good_differs: str = ""
    # case -> template (str.format, named fields): the words of this rule's findings
    messages: dict[str, str] = field(default_factory=dict)
    hints: dict[str, str] = field(default_factory=dict)
    # case -> template: what a read of C does, as this rule's messages quote it (``{what}``)
    what: dict[str, str] = field(default_factory=dict)
    # "scan" (its examples are Python files), "config" (a launch check: its examples are launches,
    # bad.launch / good.launch, and its findings come from `ddcheck config`) or "smoke" (a judgement of a
    # smoke run: its examples are `ddcheck smoke` arguments, bad.smoke / good.smoke)
    face: str = "scan"
    # config rules: what the launch does when it runs (REJECT, CRASH, CORRUPT, PERF, PARSE; "CRASH or PERF"
    # where the check tells them apart), and the server_args fields whose flags the launch set it with
    consequence: str = ""
    flags: list[str] = field(default_factory=list)
    # case -> severity, for the cases of a config rule said at another severity than ``severity`` (a case
    # the check cannot be sure of): `ddcheck rules`, `explain` and every output read them here
    levels: dict[str, str] = field(default_factory=dict)
    # a table rule's name for what reports it where the tree's own start-up code runs (its warning)
    superseded_by: str = ""
    # its folder's rule.py (its code: a ScanRule subclass), "" where it has none
    code: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "severity", Severity(self.severity))
        for case, level in self.levels.items():
            Severity(level)  # a ValueError for a level that is none
            if case not in self.messages:
                raise ValueError(f"{self.id}: [levels] names {case!r}, not a case of its [messages]")

    def severity_of(self, case: str) -> Severity:
        """The severity of a finding of this rule in ``case``: its own where ``[levels]`` names it."""
        return Severity(self.levels.get(case, self.severity))

    def severities(self) -> str:
        """Its severity as `ddcheck rules` lists it: the rule's, then how many of its cases are said at
        another one (`ddcheck explain` names them: :meth:`levels_text`)."""
        others: dict[str, int] = {}
        for level in self.levels.values():
            others[level] = others.get(level, 0) + 1
        return self.severity.value + "".join(f" ({level} in {n} case{'s' if n > 1 else ''})"
                                             for level, n in sorted(others.items()))

    def explanation(self) -> str:
        """What `ddcheck explain` prints and docs/rules/ holds: :meth:`doc`, then the cases said at another
        severity than the rule's (apart from the page SARIF embeds, which stays the rule's doc)."""
        if not self.levels:
            return self.doc()
        cases = "; ".join(f"{case}: {level}" for case, level in sorted(self.levels.items()))
        return f"{self.doc()}\n## Severity by case\n{self.severity.value}, except: {cases}\n"

    def message(self, case: str, **facts: object) -> str:
        """The message of a finding of this rule in ``case``, filled with its facts."""
        return self.messages[case].format(**facts)

    def hint(self, case: str, **facts: object) -> str:
        """The hint (how to fix it) of a finding of this rule in ``case``, filled with its facts."""
        return self.hints[case].format(**facts)

    def describe(self, case: str, **facts: object) -> str:
        """What a read of C does in ``case`` (this rule's kind of hazard), filled with its facts."""
        return self.what[case].format(**facts)

    @property
    def consequences(self) -> list[str]:
        return [c.strip() for c in self.consequence.split(" or ") if c.strip()]

    def doc(self) -> str:
        """Markdown: what it does, why it is bad, example, fix (the Ruff rule-doc shape)."""
        if self.face == "config":
            return self._config_doc()
        if self.face == "smoke":
            return self._smoke_doc()
        return (
            f"# {self.id} {self.name} ({self.severity.value})\n\n{self.summary}\n\n"
            f"## What it does\n{self.what_it_does.strip()}\n\n## Why is this bad?\n{self.why_bad.strip()}\n\n"
            f"## Example\n```python\n{self.bad_example.rstrip()}\n```\n\n"
            + ("Use instead (what `ddcheck fix --unsafe-fixes` writes):" if self.good_is_fix else
               f"Use instead (written by hand: {self.good_differs}):")
            + "\n```python\n"
            f"{self.good_example.rstrip()}\n```\n\n## Fix ({self.fix})\n{self.fix_text.strip()}\n"
        )


    def _config_doc(self) -> str:
        """A launch check's page: its examples are `ddcheck config` runs (see rules/README.md)."""
        flags = ", ".join(f"`--{f.replace('_', '-')}`" for f in self.flags) or "none (the launch as a whole)"
        return (
            f"# {self.id} {self.name} ({self.severity.value})\n\n{self.summary}\n\n"
            f"A `ddcheck config` rule. Consequence: {self.consequence}. Flags it concerns: {flags}.\n\n"
            f"## What it does\n{self.what_it_does.strip()}\n\n## Why is this bad?\n{self.why_bad.strip()}\n\n"
            f"## Example\n```sh\n{launch_command(self.bad_example)}\n```\n\n"
            f"Use instead:\n```sh\n{launch_command(self.good_example)}\n```\n\n"
            f"## Fix\n{self.fix_text.strip()}\n"
        )


    def _smoke_doc(self) -> str:
        """A smoke rule's page: its examples are `ddcheck smoke` runs (``bad.smoke``/``good.smoke``)."""
        return (
            f"# {self.id} {self.name} ({self.severity.value})\n\n{self.summary}\n\n"
            f"A `ddcheck smoke` rule (its findings: `--format sarif` or `github`). Consequence: {self.consequence}.\n\n"
            f"## What it does\n{self.what_it_does.strip()}\n\n## Why is this bad?\n{self.why_bad.strip()}\n\n"
            f"## Example\n```sh\n{smoke_command(self.bad_example)}\n```\n\n"
            f"Use instead:\n```sh\n{smoke_command(self.good_example)}\n```\n\n"
            f"## Fix\n{self.fix_text.strip()}\n"
        )


def smoke_example(text: str) -> list[str]:
    """A smoke rule's example (``bad.smoke``/``good.smoke``): the `ddcheck smoke` arguments of its one
    line that is not a ``#`` comment (shell words)."""
    import shlex

    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return shlex.split(lines[0]) if lines else []


def smoke_command(text: str) -> str:
    import shlex

    return " ".join(["ddcheck smoke", *map(shlex.quote, smoke_example(text))])


def launch_example(text: str) -> tuple[str, list[str], list[str]]:
    """A config rule's example (``bad.launch``/``good.launch``): the target named on its
    ``# sglang: TARGET`` line, the `ddcheck config` options of its ``# options: ...`` line, and the
    launch command (shell words; other ``#`` lines and ``\\`` line ends are dropped)."""
    import shlex

    target, options, lines = "", [], []
    for line in text.splitlines():
        if line.startswith("# sglang:"):
            target = line.split(":", 1)[1].split()[0]
        elif line.startswith("# options:"):
            options = shlex.split(line.split(":", 1)[1])
        elif line.strip() and not line.lstrip().startswith("#"):
            lines.append(line.rstrip().removesuffix("\\"))
    return target, options, shlex.split(" ".join(lines))


def launch_command(text: str) -> str:
    """The example as the `ddcheck config` command that checks it."""
    import shlex

    target, options, argv = launch_example(text)
    return " ".join(["ddcheck config", *options, "--sglang", target, "--", *map(shlex.quote, argv)])


def rules_dir() -> Path:
    # This code's own rules: an installed wheel's ddcheck/_rules, or a checkout's rules/ beside its
    # ddcheck/ (run with PYTHONPATH set to it, another checkout may be installed, editable: its rules are
    # not this code's); else the package's folder from its spec. importlib.resources would cost a scan
    # ~4 ms to import, and the folder is read as files on disk in any case.
    from importlib.util import find_spec

    here = Path(__file__).resolve().parents[1]  # the ddcheck package (this is ddcheck/rules/__init__.py)
    if (here / "_rules" / "__init__.py").is_file():
        return here / "_rules"
    if (here.parent / "pyproject.toml").is_file() and (here.parent / "rules" / "__init__.py").is_file():
        return here.parent / "rules"
    try:
        spec = find_spec("ddcheck._rules")
    except ModuleNotFoundError:
        spec = None
    if spec is None or not spec.submodule_search_locations:  # a checkout that was not installed
        return Path(__file__).resolve().parents[2] / "rules"
    return Path(next(iter(spec.submodule_search_locations)))


@lru_cache(maxsize=1)
def all_rules() -> dict[str, Rule]:
    """Every rule by id. The definitions are read from TOML once and kept as JSON in the cache folder
    (:func:`ddcheck.tree.files.kept`), under the stamps of what they are made from: the rule folders and this
    module (which reads them). So a scan does not load the TOML reader, nor stat the rest of ddcheck."""
    from ddcheck.tree.files import kept

    return kept("rules", [*rule_roots(), Path(__file__)], _definitions, _read)


RULE_PATH = "DDCHECK_RULE_PATH"  # more folders of rule folders (os.pathsep between), after the shipped ones


def rule_roots() -> list[Path]:
    """The folders whose rule folders are the rules: the shipped ``rules/``, then ``DDCHECK_RULE_PATH``'s."""
    import os

    extra = [Path(p).resolve() for p in os.environ.get(RULE_PATH, "").split(os.pathsep) if p]
    return [rules_dir(), *extra]


def rule_folders() -> dict[str, Path]:
    """Each rule's folder by id (its folder's name): a folder with a ``rule.toml``; the first root wins."""
    out: dict[str, Path] = {}
    for root in rule_roots():
        if root.is_dir():
            for folder in sorted(p for p in root.iterdir() if (p / "rule.toml").is_file()):
                out.setdefault(folder.name, folder)
    return out


def _definitions() -> list[dict]:
    import tomllib

    out = []
    for folder in sorted(rule_folders().values(), key=lambda p: p.name):
        data = tomllib.loads((folder / "rule.toml").read_text(encoding="utf-8"))
        for name, key in (("bad.py", "bad_example"), ("good.py", "good_example"),
                          ("bad.launch", "bad_example"), ("good.launch", "good_example"),
                          ("bad.smoke", "bad_example"), ("good.smoke", "good_example")):
            if (folder / name).is_file():
                data[key] = (folder / name).read_text(encoding="utf-8")
        if (folder / "rule.py").is_file():
            data["code"] = str(folder / "rule.py")
        out.append(data)
    return out


def _read(value) -> dict[str, Rule]:
    """Kept definitions as rules: text, flags and tables of text only, each a rule as Rule accepts it
    (else a TypeError or ValueError, and they are read from the TOML again, the copy rewritten)."""
    if not (isinstance(value, list) and all(
            isinstance(d, dict) and all(_plain(v) for v in d.values()) for d in value)):
        raise TypeError("not rule definitions")
    return _by_id(value)


def _plain(v) -> bool:
    return isinstance(v, (str, bool)) or isinstance(v, dict) and all(
        isinstance(k, str) and isinstance(t, str) for k, t in v.items()) or isinstance(v, list) and all(
        isinstance(t, str) for t in v)


def _by_id(definitions: list[dict]) -> dict[str, Rule]:
    rules = [Rule(**d) for d in definitions]
    return {r.id: r for r in rules}


def get_rule(rule_id: str) -> Rule | None:
    rules = all_rules()
    key = rule_id.strip().upper()
    if key in rules:
        return rules[key]
    return next((r for r in rules.values() if r.name == rule_id.strip()), None)


def rule_named(name: str) -> Rule | None:
    """A config check's rule by its name (the check's id, ``verify-width``): the check names its rule,
    the registry gives its id, severity and words."""
    return _names().get(name)


@lru_cache(maxsize=1)
def _names() -> dict[str, Rule]:
    return {r.name: r for r in all_rules().values()}


def rule_of(rule_id: str) -> Rule:
    """A finding's rule, by exact id: its severity and words (the analysis asks, never decides)."""
    return all_rules()[rule_id]


# ------------------------------------------------------------------ a rule's code

class Claim(namedtuple("Claim", "case facts kind")):
    """A read of C a rule's :meth:`ScanRule.judge` takes for itself: the case of its ``[what]`` that says
    it (str), the facts to fill it with (dict), and the kind of hazard the analysis treats it as (how it
    is ranked against another report of the same read, whether a fix threads W for it). A collections
    namedtuple: typing costs a one-file scan its import."""

    __slots__ = ()


class ScanRule:
    """A scan rule's code: ``rules/<ID>/rule.py`` defines one subclass (a rule without one is this base:
    it claims nothing and says the analysis's own fix).

    - ``kinds``: the analysis's kinds of hazard whose reads are this rule's findings (``layout``,
      ``capacity``, ``fallback``); one rule a kind.
    - :meth:`judge`: the rule's judgement cases. Every read of C on the verify path, once the analysis has
      judged it, is offered to each rule in id order; the first :class:`Claim` takes it.
    - :meth:`hint`: how to fix one of its findings, as a case of its ``[hints]`` with its facts.

    The objects offered are the analysis's (:class:`ddcheck.analysis.engine.Read`,
    :class:`ddcheck.analysis.planning.Report`); a rule's code asks them and imports nothing above this
    floor."""

    kinds: tuple[str, ...] = ()

    def __init__(self, rule_id: str) -> None:
        self.id = rule_id

    def judge(self, read) -> Claim | None:
        """This rule's case for a read of C (``read.kind``, ``read.case``: the analysis's verdict), or None."""
        return None

    def claim(self, case: str, kind: str | None = None, **facts: object) -> Claim:
        """The read is this rule's, in ``case`` (treated as ``kind``, by default this rule's first)."""
        return Claim(case, facts, kind or (self.kinds[0] if self.kinds else "layout"))

    def hint(self, report) -> tuple[str, dict, object, str | None]:
        """(hint case, its facts, fix plan or None, replacement or None) for one of this rule's findings:
        by default the analysis's fix to the per-step width (``report.to_width()``)."""
        return report.to_width()

    @staticmethod
    def no_fix(case: str, **facts: object) -> tuple[str, dict, None, None]:
        """A hint with no fix."""
        return case, facts, None, None


class LaunchRule:
    """A config rule's code: ``rules/<ID>/rule.py`` (``face = "config"``) defines one subclass, as a scan
    rule's defines a :class:`ScanRule`: the rule's judgement of a launch, its findings said in its own
    words (its ``[messages]``/``[hints]`` cases) with its severity and consequence.

    - ``stage``: when ``ddcheck config`` asks it: ``parse`` (the release's argparse refused the command
      line), ``algorithm`` (the launch names an algorithm), ``startup`` (ddcheck's tables of the
      release's start-up guards; a finding is kept where the tree's own run went through its guard),
      ``tree_run`` (what the tree's start-up code did), ``site`` (each verify site of the launch, the
      tree's code having run), ``tree_failed`` (the tree's start-up code could not run: what is still
      known), ``smoke`` (the launch's verify path, run: ``config --smoke``). A rule may name several.
    - :meth:`check`: its findings for the launch's facts (``ddcheck.config.facts.LaunchFacts``: the
      launch's settings, the tree, its run; the analyses config offers as methods). A rule's code asks
      them and imports nothing above this floor."""

    stage: tuple[str, ...] = ("site",)

    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.id = rule.id

    def check(self, facts) -> list[Finding]:
        return []

    def finding(self, case: str, hint: str | None = None, evidence=(), backend: str | None = None,
                consequence: str | None = None, **facts: object) -> Finding:
        """A finding of this rule in ``case`` (its ``[messages]`` template, filled with ``facts``), with the
        ``[hints]`` case ``hint`` (default ``case``, where the rule has one), the tree's ``evidence`` (None
        entries dropped) and the rule's consequence (``consequence`` for a rule with more than one)."""
        rule = self.rule
        if backend is not None:
            facts["backend"] = backend
        said = rule.hints.get(hint or case)
        return Finding(rule=rule.id, severity=rule.severity_of(case), path="", line=0, column=0, end_line=0, end_column=0,
                       symbol="", message=rule.message(case, **facts),
                       hint=said.format(**facts) if said else None,
                       consequence=consequence or (rule.consequences or [None])[0], backend=backend,
                       evidence=[e for e in evidence if e is not None])

    @staticmethod
    def evidence(path: str, line: int, text: str = "") -> Evidence:
        return Evidence(path=path, line=line, text=text)

    @staticmethod
    def evidence_at(where: str | None, text: str = "") -> Evidence:
        """The evidence of a ``path:line`` the launch's facts name (as its settings keep them)."""
        path, _, line = (where or ":0").rpartition(":")
        return Evidence(path=path, line=int(line) if line.isdigit() else 0, text=text)


class StartupGuard(LaunchRule):
    """A launch the release's own start-up code refuses or rewrites with a guard of its own: a finding where
    :meth:`applies` to the launch's settings and the tree has the guard (``guard``: a pattern of the guard's
    message, found in the tree's start-up code; its file:line is the evidence), said as the rule's
    ``refused`` case with :meth:`facts`."""

    stage = ("startup",)
    guard = ""

    def applies(self, s, facts) -> bool:
        return False

    def facts(self, s) -> dict:
        return {}

    def check(self, facts):
        s = facts.settings
        if s.algorithm is None or not self.applies(s, facts):
            return []
        g = facts.guard(self.guard, s.algorithm)
        if g is None:
            return []
        return [self.finding("refused", release=s.release, evidence=[g.evidence], **self.facts(s))]


class SmokeRule:
    """A smoke rule's code: ``rules/<ID>/rule.py`` (``face = "smoke"``) defines one subclass. :meth:`check`
    judges a finished ``ddcheck smoke`` run (``ddcheck.smoke.report.SmokeReport``: its paths, their
    results, the verdict) and says its findings in the rule's own words, at the backend's file; they are
    what `ddcheck smoke --format sarif|github` reports. The run's exit code is its verdict's."""

    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.id = rule.id

    def check(self, report) -> list[Finding]:
        return []

    def finding(self, case: str, file: str, hint: str | None = None, **facts: object) -> Finding:
        """A finding of this rule in ``case`` at ``file`` as a whole (no line: the run judged the backend's
        verify path, not one of its lines), its message and ``hint`` case filled with ``facts``."""
        rule = self.rule
        said = rule.hints.get(hint or case)
        return Finding(rule=rule.id, severity=rule.severity_of(case), path=file, line=0, column=0, end_line=0,
                       end_column=0, symbol="", message=rule.message(case, **facts),
                       hint=said.format(**facts) if said else None,
                       consequence=(rule.consequences or [None])[0], backend=facts.get("backend"))


@lru_cache(maxsize=1)
def smoke_rules() -> tuple[SmokeRule, ...]:
    """The smoke rules, in id order (the registry's)."""
    return tuple(_load(r, SmokeRule) for r in sorted(all_rules().values(), key=lambda r: r.id) if r.face == "smoke")


def launch_rules(stage: str) -> tuple[LaunchRule, ...]:
    """The config rules asked at ``stage``, in id order (the registry's: no list of checks elsewhere)."""
    return tuple(code for code in _launch_codes().values() if stage in code.stage)


def launch_rule(rule_id: str) -> LaunchRule:
    """A config rule's code, by id (where config asks one rule's judgement of other facts)."""
    return _launch_codes()[rule_id]


@lru_cache(maxsize=1)
def _launch_codes() -> dict[str, LaunchRule]:
    return {r.id: _load(r, LaunchRule) for r in sorted(all_rules().values(), key=lambda r: r.id)
            if r.face == "config"}


def code_of(rule_id: str) -> ScanRule:
    """A scan rule's code, by id (the base for a rule without a rule.py)."""
    return _codes()[rule_id]


def scan_codes() -> tuple[ScanRule, ...]:
    """Every scan rule's code, in id order: the order in which they judge a read."""
    return tuple(_codes().values())


def rule_of_kind(kind: str) -> Rule:
    """The rule whose findings the analysis's reads of ``kind`` are (its code's ``kinds``)."""
    return rule_of(_kinds()[kind])


@lru_cache(maxsize=1)
def _codes() -> dict[str, ScanRule]:
    return {r.id: _load(r, ScanRule) for r in sorted(all_rules().values(), key=lambda r: r.id) if r.face == "scan"}


@lru_cache(maxsize=1)
def _kinds() -> dict[str, str]:
    out: dict[str, str] = {}
    for code in scan_codes():
        for kind in code.kinds:
            if kind in out:
                raise TypeError(f"rules {out[kind]} and {code.id} both report the analysis's {kind!r} reads")
            out[kind] = code.id
    return out


def _load(rule: Rule, base: type):
    """A rule's rule.py, run as a module of its own; it defines exactly one subclass of ``base``
    (:class:`ScanRule` for a scan rule, :class:`LaunchRule` for a config rule, :class:`SmokeRule` for a
    smoke rule)."""
    if not rule.code:
        return base(rule.id) if base is ScanRule else base(rule)
    import importlib.util
    import sys

    name = f"ddcheck_rule_{rule.id}"
    spec = importlib.util.spec_from_file_location(name, rule.code)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    found = [c for c in vars(module).values()
             if isinstance(c, type) and issubclass(c, base) and c.__module__ == name]
    if len(found) != 1:
        raise TypeError(f"{rule.code}: defines {len(found)} {base.__name__} subclasses, not one")
    return found[0](rule.id) if base is ScanRule else found[0](rule)


_READ_FROM: list[list[str]] = []  # the rule roots the kept registry was read from


def follow_rule_path() -> None:
    """Forget the rules read so far where ``DDCHECK_RULE_PATH`` now names other folders: a process that
    serves several callers (config's kept child, each request with the caller's environment) judges each
    launch by the caller's rules."""
    roots = [str(r) for r in rule_roots()]
    if _READ_FROM and _READ_FROM[0] != roots:
        for cached in (all_rules, _names, _launch_codes, _codes, _kinds, smoke_rules):
            cached.cache_clear()
    _READ_FROM[:] = [roots]
