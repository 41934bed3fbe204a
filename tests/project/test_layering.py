"""The floors of ddcheck/ (docs/architecture.md): each module imports only its own floor or lower ones,
and nothing imports in a circle, neither module to module nor package to package.

Every import counts, a function's own ``import`` too (it runs when called, so it is a dependency all
the same). A module not declared here fails the test: give it a floor.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Bottom to top. A name stands for that module and, for a package, everything under it (but
# ``ddcheck``, the package's own __init__: its Python API).
FLOORS: list[tuple[str, tuple[str, ...]]] = [
    ("ground: the tree being checked (ddcheck/tree/), the finding model, exit codes, files written whole",
     ("ddcheck.tree", "ddcheck.base")),
    ("definitions: rules (they own their ids, severities, docs), the verify contract and backends' tables",
     ("ddcheck.rules", "ddcheck.contract")),
    ("the one road of findings: suppressions, baselines, output formats",
     ("ddcheck.diagnostics",)),
    ("analysis: the scan's model of the verify path",
     ("ddcheck.analysis",)),
    ("scan: settings, the result cache, the scan API",
     ("ddcheck.scan",)),
    # smoke imports nothing of config (test below); config --smoke composes them (ddcheck.config.smoke)
    ("smoke", ("ddcheck.smoke",)),
    ("config", ("ddcheck.config",)),
    ("fix (its --verify runs smoke) and the guard",
     ("ddcheck.fix", "ddcheck.guard")),
    ("the audit (scan, fix, smoke and config, per cell)",
     ("ddcheck.audit",)),
    ("front: the CLI, the entry points, the package's Python API",
     ("ddcheck.cli", "ddcheck.entry", "ddcheck.__main__", "ddcheck")),
]


def modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package) of every module under ``root / 'ddcheck'``."""
    out = {}
    for path in sorted((root / "ddcheck").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if package else parts)] = (path, package)
    return out


def imports(root: Path) -> dict[str, set[str]]:
    """Each module's ddcheck modules imported anywhere in it (the module itself left out)."""
    mods = modules(root)

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, (path, package) in mods.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if package else name.split(".")[:-1]
                    base = base[:len(base) - (node.level - 1)]
                    full = ".".join(base + ([node.module] if node.module else []))
                else:
                    full = node.module or ""
                for a in node.names:  # `from . import suppressions`: the submodule, where there is one
                    found.add(f"{full}.{a.name}" if f"{full}.{a.name}" in mods else full)
        graph[name] = {m for m in (known(f) for f in found if f == "ddcheck" or f.startswith("ddcheck."))
                       if m is not None and m != name}
    return graph


def floor_of(module: str) -> int | None:
    best = None
    for i, (_, names) in enumerate(FLOORS):
        for n in names:
            within = module.startswith(n + ".") and n != "ddcheck"  # the package's __init__ alone is the API
            if (module == n or within) and (best is None or len(n) > len(best[1])):
                best = (i, n)
    return best[0] if best else None


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Imports from a lower floor to a higher one, and modules without a floor."""
    out = [f"{m}: no floor declared in tests/project/test_layering.py" for m in graph if floor_of(m) is None]
    for m, deps in graph.items():
        for d in deps:
            if floor_of(m) is not None and floor_of(d) is not None and floor_of(d) > floor_of(m):
                out.append(f"{m} ({FLOORS[floor_of(m)][0].split(':')[0]}) imports {d} "
                           f"({FLOORS[floor_of(d)][0].split(':')[0]}), a higher floor")
    return sorted(out)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def packages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between ddcheck's second-level names (``ddcheck.config``, ``ddcheck.smoke``, ...)."""
    def top(m: str) -> str:
        return ".".join(m.split(".")[:2])

    out: dict[str, set[str]] = {}
    for m, deps in graph.items():
        out.setdefault(top(m), set()).update(top(d) for d in deps if top(d) != top(m))
    return out


GRAPH = imports(REPO)


def test_every_module_imports_only_its_floor_or_lower_ones():
    assert upward(GRAPH) == []


def test_no_module_imports_in_a_circle():
    assert cycles(GRAPH) == []


def smoke_on_launch(graph: dict[str, set[str]]) -> list[str]:
    """Imports of a ddcheck.config module by a ddcheck.smoke one (same floor, one direction only)."""
    def within(m: str, package: str) -> bool:
        return m == package or m.startswith(package + ".")

    return sorted(f"{m} imports {d}" for m, deps in graph.items() if within(m, "ddcheck.smoke")
                  for d in deps if within(d, "ddcheck.config"))


def test_smoke_imports_nothing_of_launch():
    """smoke reads the tree through ddcheck.tree, never through config's modules (issue #33)."""
    assert smoke_on_launch(GRAPH) == []


def test_no_package_imports_in_a_circle():
    """``launch`` and ``smoke`` used to import each other (``config --smoke`` one way, the tree's
    verify-input class the other); cache, rules and suppressions did too."""
    assert cycles(packages(GRAPH)) == []


# ------------------------------------------------------------------------------- the check can fail


def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, set[str]]:
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return imports(tmp_path)


def test_the_check_finds_an_upward_import_inside_a_function(tmp_path):
    graph = _tree(tmp_path, {"ddcheck/__init__.py": "", "ddcheck/rules/__init__.py": "def f():\n    from ..scan.cache import kept\n",
                             "ddcheck/scan/__init__.py": "", "ddcheck/scan/cache.py": "from .. import rules\n"})
    assert graph["ddcheck.rules"] == {"ddcheck.scan.cache"}
    assert any(s.startswith("ddcheck.rules (definitions) imports ddcheck.scan.cache") for s in upward(graph))
    assert cycles(graph) == [["ddcheck.rules", "ddcheck.scan.cache"]]


def test_the_check_finds_packages_that_import_each_other_through_different_modules(tmp_path):
    graph = _tree(tmp_path, {"ddcheck/__init__.py": "", "ddcheck/config/__init__.py": "",
                             "ddcheck/config/api.py": "from ddcheck.smoke import run_smoke\n",
                             "ddcheck/config/child.py": "", "ddcheck/smoke/__init__.py": "",
                             "ddcheck/smoke/api.py": "import ddcheck.config.child\n"})
    assert cycles(graph) == []  # no module circle...
    assert cycles(packages(graph)) == [["ddcheck.config", "ddcheck.smoke"]]  # ...but a package one
    assert smoke_on_launch(graph) == ["ddcheck.smoke.api imports ddcheck.config.child"]


def test_an_undeclared_module_has_no_floor(tmp_path):
    graph = _tree(tmp_path, {"ddcheck/__init__.py": "", "ddcheck/newthing.py": ""})
    assert upward(graph) == ["ddcheck.newthing: no floor declared in tests/project/test_layering.py"]


@pytest.mark.parametrize("module, floor", [("ddcheck.tree.names", 0), ("ddcheck.analysis.engine", 3),
                                           ("ddcheck", len(FLOORS) - 1), ("ddcheck.config.api", 6),
                                           ("ddcheck.smoke.api", 5), ("ddcheck.tree.modules", 0),
                                           ("ddcheck.cli.scan", len(FLOORS) - 1)])
def test_floors_are_found_by_the_longest_name(module, floor):
    assert floor_of(module) == floor


# Where Python source is parsed: the tree's modules (tree/) and the scan's model of the verify path
# (analysis/). Everything else asks them.
PARSERS = ("ddcheck/tree/", "ddcheck/analysis/")


def parses(root: Path) -> list[str]:
    """``file:line`` of each call of ``ast.parse`` (or ``parse`` imported from ast), or of the builtin
    ``compile`` on anything but a syntax tree built in place (``compile(ast.Module(...), ...)``: source
    text compiled is source text parsed), outside PARSERS."""
    out = []
    for path in sorted((root / "ddcheck").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(PARSERS):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        from_ast = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "ast"
                    for a in n.names if a.name == "parse"}
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and (isinstance(n.func, ast.Attribute) and n.func.attr == "parse"
                                            and isinstance(n.func.value, ast.Name) and n.func.value.id == "ast"
                                            or isinstance(n.func, ast.Name) and n.func.id in from_ast
                                            or isinstance(n.func, ast.Name) and n.func.id == "compile"
                                            and not _built_tree(n.args[0] if n.args else None)):
                out.append(f"{rel}:{n.lineno}")
    return out


def _built_tree(node) -> bool:
    """``ast.Module(...)``, ``ast.Expression(...)``: a syntax tree ddcheck builds itself."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        isinstance(node.func.value, ast.Name) and node.func.value.id == "ast"


def test_only_the_target_model_and_the_analysis_parse_python():
    assert parses(REPO) == []


def test_the_parse_check_finds_a_parse_outside(tmp_path):
    (tmp_path / "ddcheck" / "config").mkdir(parents=True)
    (tmp_path / "ddcheck" / "tree").mkdir()
    (tmp_path / "ddcheck" / "config" / "x.py").write_text("import ast\nfrom ast import parse as p\nast.parse('1')\np('2')\n"
                                                         "compile('3', 'x', 'exec')\ncompile(ast.Module(body=[]), 'x', 'exec')\n")
    (tmp_path / "ddcheck" / "tree" / "y.py").write_text("import ast\nast.parse('1')\n")
    assert parses(tmp_path) == ["ddcheck/config/x.py:3", "ddcheck/config/x.py:4", "ddcheck/config/x.py:5"]


# ------------------------------------------------------------------------------- a rule's code


def rule_code_imports(root: Path) -> list[str]:
    """Imports of a rule's code (``rules/<ID>/rule.py``) above the definitions floor: the rules registry
    runs it, so it stands on the registry's floor (it asks the analysis's objects it is handed)."""
    definitions = next(i for i, (title, _) in enumerate(FLOORS) if title.startswith("definitions"))
    out = []
    for path in sorted((root / "rules").glob("*/rule.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                if (name == "ddcheck" or name.startswith("ddcheck.")) and \
                        (floor_of(name) is None or floor_of(name) > definitions):
                    out.append(f"{path.relative_to(root)} imports {name}")
    return out


def test_a_rules_code_stands_on_the_definitions_floor():
    assert (REPO / "rules" / "DD003" / "rule.py").is_file()
    assert rule_code_imports(REPO) == []


def test_the_check_finds_a_rule_importing_the_analysis(tmp_path):
    (tmp_path / "rules" / "DD999").mkdir(parents=True)
    (tmp_path / "rules" / "DD999" / "rule.py").write_text("from ddcheck.analysis.engine import Read\n")
    assert rule_code_imports(tmp_path) == ["rules/DD999/rule.py imports ddcheck.analysis.engine"]


# The one class/method resolver (issue 42): the tree's classes, their bases, aliases and method
# resolution are answered by the tree model's hierarchy; anywhere else a read of a class statement's
# bases, or a table of them, would be a second resolver that a fork's class quirk must be taught again.
CLASS_MODEL = ("ddcheck/tree/hierarchy.py",)
BASES_NAMES = frozenset({"bases", "class_bases"})


def bases_reads(root: Path) -> list[str]:
    """``file:line`` of each read of ``X.bases`` / ``X.class_bases`` and each name ``class_bases`` (a
    variable, parameter, field or keyword) outside CLASS_MODEL."""
    out = []
    for path in sorted((root / "ddcheck").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in CLASS_MODEL:
            continue
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = n.attr if isinstance(n, ast.Attribute) else n.id if isinstance(n, ast.Name) \
                else n.arg if isinstance(n, (ast.arg, ast.keyword)) else None
            if isinstance(n, ast.Attribute) and name in BASES_NAMES or name == "class_bases":
                out.append(f"{rel}:{n.lineno}")
    return sorted(set(out))


def test_only_the_tree_model_resolves_classes():
    assert bases_reads(REPO) == []


def test_the_class_check_finds_a_second_resolver(tmp_path):
    (tmp_path / "ddcheck" / "analysis").mkdir(parents=True)
    (tmp_path / "ddcheck" / "tree").mkdir()
    (tmp_path / "ddcheck" / "analysis" / "x.py").write_text(
        "def f(node, o):\n    names = [b.id for b in node.bases]\n    return o.class_bases\n"
        "class M:\n    class_bases: dict\n")
    (tmp_path / "ddcheck" / "tree" / "hierarchy.py").write_text("def g(node):\n    return node.bases\n")
    assert bases_reads(tmp_path) == ["ddcheck/analysis/x.py:2", "ddcheck/analysis/x.py:3", "ddcheck/analysis/x.py:5"]


# The engine's parts meet through public interfaces (issue 42): no module of the analysis reaches
# into another object's private state. ``x._name`` is allowed only on ``self`` and ``cls``; a module's
# private function imported by name (``from .reports import _statement_of``) is no attribute and is
# allowed; so are the few public names Python itself spells with an underscore.
PRIVATE_SCOPE = "ddcheck/analysis"
PYTHON_UNDERSCORED = frozenset({"_fields", "_exit"})  # ast nodes' (and namedtuples') fields; os._exit


def private_reads(root: Path) -> list[str]:
    """``file:line: expression`` of each ``x._name`` (read, written or deleted; dunders aside) in
    PRIVATE_SCOPE where ``x`` is not the name ``self`` or ``cls``."""
    out = []
    for path in sorted((root / PRIVATE_SCOPE).glob("*.py")):
        rel = path.relative_to(root).as_posix()
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(n, ast.Attribute) or not n.attr.startswith("_") or n.attr in PYTHON_UNDERSCORED \
                    or n.attr.startswith("__") and n.attr.endswith("__"):
                continue
            if not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")):
                out.append(f"{rel}:{n.lineno}: {ast.unparse(n)}")
    return out


def test_the_analysis_reads_no_other_objects_private_state():
    assert private_reads(REPO) == []


def test_the_private_check_finds_a_reach_into_another_object(tmp_path):
    (tmp_path / PRIVATE_SCOPE).mkdir(parents=True)
    (tmp_path / PRIVATE_SCOPE / "x.py").write_text(
        "from .reports import _statement_of\n"
        "class P:\n    def f(self, engine):\n        self._memo = engine._memo\n"
        "        engine.callers._recorded[1] = 2\n        return self._memo, node._fields, node.__dict__, _statement_of\n"
        "    @classmethod\n    def g(cls):\n        return cls._made, cls()._index()\n")
    assert private_reads(tmp_path) == [f"{PRIVATE_SCOPE}/x.py:4: engine._memo",
                                       f"{PRIVATE_SCOPE}/x.py:5: engine.callers._recorded",
                                       f"{PRIVATE_SCOPE}/x.py:9: cls()._index"]

