"""The target SGLang's command-line flag table, read with ``ast`` (never imported), and an argparse
parser rebuilt from it.

SGLang declared its flags three ways over its releases, and all three are read here:

* up to 0.5.12, ``parser.add_argument(...)`` calls in ``ServerArgs.add_cli_args``;
* 0.5.14 - 0.5.18, ``name: A[T, Arg(...)] = default`` fields of ``ServerArgs`` that
  ``arg_groups/arg_utils.add_cli_args_from_dataclass`` turns into flags (plus a few manual calls);
* from 0.5.20 on, the same ``A[...]`` fields spread over ``arg_groups/fields/*.py``.

Rebuilding a real ``argparse.ArgumentParser`` (``allow_abbrev`` on, as ``prepare_server_args``
leaves it) makes prefix abbreviations and their ambiguity behave exactly as they will at launch.
The table is cached per content hash of the files it was read from.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path

from pydantic import BaseModel

from ddcheck.tree.files import replace
from ddcheck.tree.sources import SourceTree, cache_dir, content_hash, read_regular
from ddcheck.tree.modules import TreeModules
from ddcheck.tree.parse import SourceError
from ddcheck.tree.names import (ARG_GROUP_FIELDS_DIR, SPECULATIVE_FOLDER, ARG_CHOICES_FILE, SERVER_ARGS_CLASS, SERVER_ARGS_CONFIG_PARSER_FILE,
                                  SERVER_ARGS_FILE, SPECULATIVE_ALGORITHM_CLASS, SPEC_INFO_FILE as SPEC_INFO,
                                  VERSION_FILES)
from ddcheck.tree.names import SPECULATIVE_ALGORITHM

TABLE_VERSION = 3  # bump when extraction changes, to invalidate cached tables
FIELD_SOURCES = (SERVER_ARGS_FILE,)
CHOICE_SOURCES = (SERVER_ARGS_FILE, ARG_CHOICES_FILE)
CONFIG_MERGER = SERVER_ARGS_CONFIG_PARSER_FILE


class FlagSpec(BaseModel):
    """One argparse option as SGLang registers it (only what parsing needs)."""

    options: list[str]
    dest: str
    kind: str = "store"  # store | store_true | store_false | store_const | append | count
    nargs: str | int | None = None
    type: str = "str"  # str | int | float
    choices: list | None = None
    default: object = None
    const: object = None
    required: bool = False
    where: str = ""  # relpath:line of the declaration


class FlagTable(BaseModel):
    release: str
    flags: list[FlagSpec]
    algorithms: list[str] | None = None  # None: the release takes any name (checked later)
    algorithm_choices: bool = False  # True when argparse itself restricts the names
    supports_config_file: bool = False
    field_defaults: dict[str, object] = {}

    def flag(self, dest: str) -> FlagSpec | None:
        return next((f for f in self.flags if f.dest == dest), None)

    def knows(self, dest: str) -> bool:
        return self.flag(dest) is not None


# ---------------------------------------------------------------------------------------------
# release and sources
# ---------------------------------------------------------------------------------------------

def release_of(tree: SourceTree) -> str:
    """The target's version string, from ``sglang/_version.py`` or the wheel name."""
    for suffix in VERSION_FILES:
        text = tree.read_text(suffix) or ""
        m = re.search(r"""__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", text)
        if m:
            return m.group(1)
    m = re.search(r"sglang-([0-9][^-]*)-", tree.wheel.name if tree.wheel else "") or \
        re.search(r"sglang==(\S+)", tree.label)
    return m.group(1) if m else f"unknown ({tree.label})"


def _field_files(tree: SourceTree) -> list:
    files = [tree.find(s) for s in FIELD_SOURCES]
    files += sorted((f for f in tree.files if ARG_GROUP_FIELDS_DIR in f.relpath and f.relpath.endswith(".py")),
                    key=lambda f: f.relpath)
    return [f for f in files if f is not None]


def _parse(tree: SourceTree, f) -> ast.Module:
    """The file's syntax tree; a LookupError naming it (a usage error) where it cannot be read."""
    model = TreeModules.of(tree)
    mod = model.parsed(f.relpath)
    if mod is not None:
        return mod
    exc = model.errors.get(f.relpath)
    if isinstance(exc, SourceError):  # does not parse, or cannot be decoded: said as the scan says it
        raise LookupError(f"{f.display}: {exc}; the flags of this tree cannot be read") from exc
    raise LookupError(f"{f.display}: cannot be read ({type(exc).__name__}: {exc}); "
                      "the flags of this tree cannot be read") from exc


# ---------------------------------------------------------------------------------------------
# extraction
# ---------------------------------------------------------------------------------------------

def _literal(node, consts: dict):
    """Best-effort value of an expression: literals, known module constants, ``a + b`` of lists."""
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        pass
    if isinstance(node, ast.Name) and node.id in consts:
        return consts[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _literal(node.left, consts), _literal(node.right, consts)
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            return list(a) + list(b)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("list", "sorted", "set", "tuple") \
            and node.args:
        v = _literal(node.args[0], consts)
        return list(v) if isinstance(v, (list, tuple, set, dict)) else None
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        out = []
        for e in node.elts:
            if isinstance(e, ast.Starred):
                v = _literal(e.value, consts)
                if not isinstance(v, (list, tuple)):
                    return None
                out.extend(v)
            else:
                v = _literal(e, consts)
                if v is None:
                    return None
                out.append(v)
        return out
    return None


def _module_consts(modules: list[ast.Module]) -> dict:
    consts: dict = {}
    for _ in range(2):  # two passes so constants built from other constants resolve
        for mod in modules:
            for node in mod.body:
                if isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    v = _literal(node.value, consts)
                    if isinstance(v, dict):
                        v = list(v)
                    if isinstance(v, (list, tuple, set)):
                        for t in targets:
                            if isinstance(t, ast.Name):
                                consts[t.id] = list(v)
    return consts


def _type_name(node) -> str:
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return name if name in ("int", "float") else "str"


def _kind_of_action(value) -> str:
    name = value.value if isinstance(value, ast.Constant) else getattr(value, "id", getattr(value, "attr", ""))
    name = str(name)
    low = name.lower()
    if low in ("store_true", "store_false", "store_const", "append", "count", "store"):
        return low
    if "storetrue" in low:
        return "store_true"
    if "storefalse" in low:
        return "store_false"
    if "storeconst" in low:
        return "store_const"
    if low == "deprecatedaction":  # nargs=0, refuses the flag when used
        return "deprecated"
    return "store"


def _unwrap_type(node):
    """(inner, is_list, literal_values) for an annotation: Optional[X], X | None, List[X], Literal."""
    while True:
        if isinstance(node, ast.Subscript) and getattr(node.value, "id", getattr(node.value, "attr", "")) == "Optional":
            node = node.slice
            continue
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            side = node.left if not (isinstance(node.left, ast.Constant) and node.left.value is None) else node.right
            node = side
            continue
        break
    if isinstance(node, ast.Subscript):
        head = getattr(node.value, "id", getattr(node.value, "attr", ""))
        if head in ("List", "list"):
            return node.slice, True, None
        if head == "Literal":
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return node, False, [_literal(e, {}) for e in elts]
    return node, False, None


def _fields_from_classes(mod: ast.Module, relpath: str, consts: dict, defaults: dict) -> list[FlagSpec]:
    """``name: A[T, "help" | Arg(...)] = default`` fields -> flags, as add_cli_args_from_dataclass does."""
    out = []
    for cls in (n for n in ast.walk(mod) if isinstance(n, ast.ClassDef)):
        for st in cls.body:
            if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
                continue
            name = st.target.id
            default = _default_of(st.value, consts)
            if cls.name == SERVER_ARGS_CLASS or name not in defaults:
                defaults[name] = default
            ann = st.annotation
            if not (isinstance(ann, ast.Subscript) and getattr(ann.value, "id", getattr(ann.value, "attr", "")) in ("A", "Annotated")):
                continue
            elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            if len(elts) < 2:
                continue
            meta = next((e for e in elts[1:] if isinstance(e, ast.Constant) and isinstance(e.value, str)
                         or isinstance(e, ast.Call) and getattr(e.func, "id", getattr(e.func, "attr", "")) == "Arg"), None)
            if meta is None:
                continue
            kw = {k.arg: k.value for k in meta.keywords} if isinstance(meta, ast.Call) else {}
            if kw.get("no_cli") is not None and _literal(kw["no_cli"], consts) is True:
                continue
            cli = _literal(kw.get("cli_name"), consts) or "--" + name.replace("_", "-")
            options = [cli] + list(_literal(kw.get("aliases"), consts) or [])
            spec = FlagSpec(options=options, dest=name, default=default, where=f"{relpath}:{st.lineno}",
                            const=_literal(kw.get("const"), consts),
                            required=_literal(kw.get("required"), consts) is True
                            or (st.value is None and _literal(kw.get("required"), consts) is None))
            nargs = _literal(kw.get("nargs"), consts)
            choices = _literal(kw.get("choices"), consts) if "choices" in kw else None
            inner, is_list, lit = _unwrap_type(elts[0])
            if "action" in kw:
                spec.kind = _kind_of_action(kw["action"])
                ak = kw.get("action_kwargs")
                if isinstance(ak, ast.Dict):
                    for k, v in zip(ak.keys, ak.values):
                        if _literal(k, consts) == "nargs":
                            nargs = _literal(v, consts)
                spec.nargs = nargs
            elif lit is not None:
                spec.choices = choices or lit
                spec.type = type(lit[0]).__name__ if lit and type(lit[0]) in (int, float) else "str"
            elif is_list and "type_parser" not in kw:
                spec.type, spec.nargs, spec.choices = _type_name(inner), nargs or "+", choices
            elif getattr(inner, "id", None) == "bool":
                spec.kind = "store_true"
            else:
                spec.type = "str" if "type_parser" in kw else _type_name(inner)
                spec.choices, spec.nargs = choices, nargs
            out.append(_listify(spec))
    return out


def _default_of(value, consts):
    if value is None:
        return None
    if isinstance(value, ast.Call) and any(k.arg == "default" for k in value.keywords):
        value = next(k.value for k in value.keywords if k.arg == "default")
    v = _literal(value, consts)
    return v


def _add_argument_calls(mod: ast.Module, relpath: str, consts: dict, defaults: dict) -> list[FlagSpec]:
    out = []
    for call in (n for n in ast.walk(mod) if isinstance(n, ast.Call)):
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument"):
            continue
        options = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if not options or not options[0].startswith("-"):
            continue
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        longest = next((o for o in options if o.startswith("--")), options[0])
        dest = _literal(kw.get("dest"), consts) or longest.lstrip("-").replace("-", "_")
        dnode = kw.get("default")
        if isinstance(dnode, ast.Attribute) and getattr(dnode.value, "id", "") == SERVER_ARGS_CLASS:
            default = defaults.get(dnode.attr)
        elif isinstance(dnode, ast.Call) and getattr(dnode.func, "id", "") == "_declared_default" and dnode.args:
            default = defaults.get(_literal(dnode.args[0], consts))
        else:
            default = _literal(dnode, consts)
        spec = FlagSpec(options=options, dest=dest, default=default, where=f"{relpath}:{call.lineno}",
                        kind=_kind_of_action(kw["action"]) if "action" in kw else "store",
                        nargs=_literal(kw.get("nargs"), consts), const=_literal(kw.get("const"), consts),
                        type=_type_name(kw["type"]) if "type" in kw else "str",
                        choices=_literal(kw.get("choices"), consts) if "choices" in kw else None,
                        required=_literal(kw.get("required"), consts) is True)
        if spec.kind in ("store_true", "store_false") and dnode is None:
            spec.default = spec.kind == "store_false"
        out.append(_listify(spec))
    return out


def _algorithms(tree: SourceTree, flags: list[FlagSpec]) -> tuple[list[str] | None, bool]:
    """Algorithm names the release accepts: argparse choices, else the SpeculativeAlgorithm enum
    members (plus NEXTN, an alias resolved before the lookup) and names registered in its sources."""
    spec = next((f for f in flags if f.dest == SPECULATIVE_ALGORITHM), None)
    if spec and spec.choices:
        return [str(c) for c in spec.choices], True
    f = tree.find(SPEC_INFO)
    mod = TreeModules.of(tree).parsed(f.relpath) if f is not None else None
    if mod is None:
        return None, False
    names = set()
    for node in ast.walk(mod):
        if isinstance(node, ast.ClassDef) and node.name == SPECULATIVE_ALGORITHM_CLASS:
            for st in node.body:
                if isinstance(st, ast.Assign):
                    names.update(t.id for t in st.targets if isinstance(t, ast.Name) and t.id.isupper())
    names.discard("NONE")
    if names:
        names.add("NEXTN")
    for f in tree.files:  # plugin registrations shipped with the release (real calls, not docstrings)
        if f"/{SPECULATIVE_FOLDER}/" in f"/{f.relpath}" and f.relpath.endswith(".py"):
            src = f.read_bytes().decode("utf-8", "replace")
            mod = TreeModules.of(tree).parsed(f.relpath) if "SpeculativeAlgorithm.register(" in src else None
            for node in ast.walk(mod) if mod is not None else ():
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register" \
                        and getattr(node.func.value, "id", "") == SPECULATIVE_ALGORITHM_CLASS and node.args \
                        and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                    names.add(node.args[0].value.upper())
    return (sorted(names) or None), False


def extract(tree: SourceTree) -> FlagTable:
    files = _field_files(tree)
    if not files:
        raise LookupError(f"{tree.label}: no {SERVER_ARGS_FILE}; is this an SGLang tree?")
    mods = [(f.relpath, _parse(tree, f)) for f in files]
    choice_mods = [_parse(tree, f) for f in (tree.find(s) for s in CHOICE_SOURCES) if f is not None]
    consts = _module_consts(choice_mods + [m for _, m in mods])
    defaults: dict = {}
    flags: list[FlagSpec] = []
    for rel, mod in mods:
        flags += _fields_from_classes(mod, rel, consts, defaults)
    for rel, mod in mods:
        flags += _add_argument_calls(mod, rel, consts, defaults)
    # A field both annotated and manually added: argparse would refuse the duplicate, SGLang avoids it;
    # keep the first registration of each option string.
    seen, unique = set(), []
    for f in flags:
        opts = [o for o in f.options if o not in seen]
        if opts:
            seen.update(opts)
            unique.append(f.model_copy(update={"options": opts}))
    algos, restricted = _algorithms(tree, unique)
    text = tree.read_text(SERVER_ARGS_FILE) or ""
    return FlagTable(release=release_of(tree), flags=unique, algorithms=algos, algorithm_choices=restricted,
                     supports_config_file=any("--config" in f.options for f in unique) and "ConfigArgumentMerger" in text,
                     field_defaults={k: v for k, v in defaults.items() if _jsonable(v)})


def _jsonable(v) -> bool:
    try:
        json.dumps(v)
        return True
    except TypeError:
        return False


def _listify(spec: FlagSpec) -> FlagSpec:
    if isinstance(spec.choices, (tuple, set, frozenset)):
        spec.choices = list(spec.choices)
    return spec


def flag_table(tree: SourceTree) -> FlagTable:
    """:func:`extract`, cached under ``cache_dir()/flags`` by the content hash of the inputs."""
    inputs = _field_files(tree) + [f for f in (tree.find(s) for s in CHOICE_SOURCES[1:] + (SPEC_INFO,)) if f]
    h = content_hash(b"%d" % TABLE_VERSION + b"".join(f.relpath.encode() + f.read_bytes() for f in inputs)
                     + release_of(tree).encode())
    path = cache_dir() / "flags" / f"{h}.json"
    if path.is_file():
        try:
            return FlagTable.model_validate_json(path.read_text())
        except ValueError:
            pass
    table = extract(tree)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace(path, table.model_dump_json().encode("utf-8"))
    except OSError:
        pass
    return table


# ---------------------------------------------------------------------------------------------
# parsing
# ---------------------------------------------------------------------------------------------

class ParseError(Exception):
    """argparse would print this and exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # noqa: D401 - argparse API
        raise ParseError(message)


_TYPES = {"int": int, "float": float, "str": str}


def build_parser(table: FlagTable) -> argparse.ArgumentParser:
    p = _Parser(prog="sglang serve", add_help=False, allow_abbrev=True)
    p.add_argument("-h", "--help", action="store_true", dest="help")
    for f in table.flags:
        kw: dict = {"dest": f.dest}
        if f.required and f.kind == "store":
            kw["required"] = True
        if f.kind in ("store_true", "store_false"):
            kw.update(action=f.kind, default=f.default if isinstance(f.default, bool) else f.kind == "store_false")
        elif f.kind == "store_const":
            kw.update(action="store_const", const=f.const, default=f.default)
        elif f.kind == "count":
            kw.update(action="count", default=f.default)
        elif f.kind == "deprecated":
            kw.update(action="store_true", default=None)
        else:
            kw.update(action="append" if f.kind == "append" else "store", type=_TYPES[f.type], default=f.default)
            if f.nargs is not None:
                kw["nargs"] = f.nargs
            if f.nargs == "?":
                kw["const"] = f.const
            if f.choices:
                kw["choices"] = f.choices
        try:
            p.add_argument(*f.options, **kw)
        except (argparse.ArgumentError, ValueError, TypeError):
            continue
    return p


def parse(table: FlagTable, argv: list[str]) -> dict:
    """Namespace of ``argv`` as the target's argparse builds it; raises :class:`ParseError`."""
    return vars(build_parser(table).parse_args(argv))


def closest_options(table: FlagTable, argv: list[str], message: str, n: int = 3) -> dict[str, list[str]]:
    """For each option word argparse refused in ``argv`` (unknown, or an abbreviation of several), the
    closest option strings of the release's own parser (``difflib``): those an ambiguous word could
    match, else all of them."""
    import difflib

    options = sorted({o for f in table.flags for o in f.options if o.startswith("--")})
    out: dict[str, list[str]] = {}
    ambiguous = re.match(r"ambiguous option: (\S+?)(?:=\S*)? could match (.+)$", message)
    if ambiguous:
        word, among = ambiguous.group(1), [o.strip() for o in ambiguous.group(2).split(",")]
        near = difflib.get_close_matches(word, among, n=n, cutoff=0.0)
        return {word: near} if near else {}
    try:
        _, extras = build_parser(table).parse_known_args(argv)
    except ParseError:
        return out
    for word in extras:
        word = word.split("=", 1)[0]
        if word.startswith("--") and word not in out:
            near = difflib.get_close_matches(word, options, n=n, cutoff=0.6)
            if near:
                out[word] = near
    return out


MAX_CONFIG_BYTES = 1 << 20


def _load_yaml(text: str):
    """YAML as SGLang's ``--config`` takes it, safely: no tags construct objects (safe loader) and
    no aliases (a few lines of anchors would otherwise expand to gigabytes)."""
    import yaml

    class NoAliases(yaml.SafeLoader):
        def compose_node(self, parent, index):
            if self.check_event(yaml.events.AliasEvent):
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(None, None, "aliases (*name) are not accepted in a launch config",
                                                  mark)
            return super().compose_node(parent, index)

    return yaml.load(text, Loader=NoAliases)  # noqa: S506 - a SafeLoader subclass


def merge_config_file(table: FlagTable, argv: list[str], load=None) -> list[str]:
    """SGLang's ``--config FILE`` merge (``ConfigArgumentMerger``): YAML keys become flags placed
    *before* the command line, so the command line wins; store_true keys with False are dropped."""
    if "--config" not in argv:
        return argv
    if argv.count("--config") > 1:
        raise ParseError("Multiple config files specified! Only one allowed.")
    i = argv.index("--config")
    if i == len(argv) - 1:
        raise ParseError("No config file specified after --config flag!")
    path = Path(argv[i + 1])
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise ParseError(f"Config file must be YAML format, got: {path.suffix}")
    if not path.exists():
        raise ParseError(f"Config file not found: {path}")
    import yaml

    try:
        if path.is_file() and path.stat().st_size > MAX_CONFIG_BYTES:
            raise ParseError(f"Config file is over {MAX_CONFIG_BYTES >> 10} KiB: {path}")
        text = read_regular(path)
        if len(text) > MAX_CONFIG_BYTES:
            raise ParseError(f"Config file is over {MAX_CONFIG_BYTES >> 10} KiB: {path}")
        data = (load or _load_yaml)(text.decode("utf-8")) or {}
    except OSError as exc:
        raise ParseError(f"Config file cannot be read: {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ParseError(f"Config file is not UTF-8: {path}: {exc.reason} at byte {exc.start}") from exc
    except yaml.YAMLError as exc:
        raise ParseError(f"Config file is not valid YAML: {path}: {exc}") from exc
    except RecursionError as exc:
        raise ParseError(f"Config file is nested too deeply to read: {path}") from exc
    except ValueError as exc:  # a value YAML reads but Python will not make (an integer of 5,000 digits)
        raise ParseError(f"Config file holds a value that cannot be read: {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ParseError("Config file must contain a dictionary at root level")
    store_true = {f.dest for f in table.flags if f.kind == "store_true"}
    out: list[str] = []
    for key, value in data.items():
        norm = str(key).replace("-", "_")
        if isinstance(value, bool):
            if norm in store_true:
                out += [f"--{key}"] if value else []
            else:
                out += [f"--{key}", str(value).lower()]
        elif isinstance(value, list):
            out += ([f"--{key}"] + [str(v) for v in value]) if value else []
        elif isinstance(value, dict):
            out += [f"--{key}", json.dumps(value)]
        else:
            out += [f"--{key}", str(value)]
    return out + argv[:i] + argv[i + 2:]
