"""Generated inputs of each class that once ended in an internal error (issue #32): nesting depth, declared
encodings (the standard library's text encodings), settings and baselines of the wrong JSON/TOML/YAML
types. What Python accepts is analysed; what it refuses is that file's error; nothing raises."""

from __future__ import annotations

import codecs
import encodings
import json
import os
import pkgutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from ddcheck.scan.api import scan
from ddcheck.fix.api import fix_targets
from ddcheck.scan.settings import Settings

from test_no_internal_error import C, GUARDS, HEAD, REPO  # the verify branch both files nest into
SHAPES = {  # one C read at the deepest point of each
    "sum": lambda n: " + ".join(["x"] * n + [C]),
    "subscripts": lambda n: "x" + "[0]" * n + f"[{C}]",
    "attributes": lambda n: C + ".real" * n,
    "calls": lambda n: "f(" * n + C + ")" * n,
    "unary": lambda n: "-" * n + C,
    "conditional": lambda n: "a if b else " * n + C,
}
# a few examples in CI; DDCHECK_EXAMPLES=500 for a longer run
FAST = settings(max_examples=int(os.environ.get("DDCHECK_EXAMPLES", "12")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _compiles(data: bytes) -> bool:
    try:
        compile(data, "generated.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError, LookupError):
        return False
    return True


def _python_compiles(path: Path) -> bool:
    """Whether ``python file.py`` accepts the file (it defines a class, nothing runs): a fresh interpreter
    at its own recursion limit (the test runner's may be raised, and the parser's depth bound follows it)."""
    return subprocess.run([sys.executable, str(path)], capture_output=True).returncode == 0


NEAR = 4  # levels: Python's nesting bound counts frames of three levels each, a frame of difference decides there


@FAST
@given(shape=st.sampled_from(sorted(SHAPES)), depth=st.integers(1, 3600))
@example(shape="attributes", depth=2989)  # `python -c "compile(...)"` refuses it, a frame short: not the oracle
@example(shape="attributes", depth=2995)  # analysed, `python file.py` refuses it: the bound (3.11)
def test_any_nesting_python_parses_is_analysed(tmp_path_factory, shape, depth):
    folder = tmp_path_factory.mktemp("deep")

    def nested(n: int) -> Path:
        path = folder / f"b{n}.py"
        path.write_bytes((HEAD + f"            self.y = {SHAPES[shape](n)}\n").encode())
        return path

    result = scan([str(nested(depth))], settings=Settings(), use_cache=False)
    analysed = result.errors == [] and any(f.line == 7 for f in result.findings)
    refused = len(result.errors) == 1 and "nested" in result.errors[0].message
    assert analysed or refused, result
    if analysed != _python_compiles(nested(depth)):  # only at Python's own bound
        assert _python_compiles(nested(depth - NEAR)) and not _python_compiles(nested(depth + NEAR)), (shape, depth)


@lru_cache(maxsize=1)
def text_encodings() -> list[str]:
    """Every codec of the standard library that is a text encoding (rot13, base64... are not)."""
    names = []
    for m in pkgutil.iter_modules(encodings.__path__):
        try:
            if codecs.lookup(m.name)._is_text_encoding:
                names.append(m.name)
        except LookupError:  # mbcs, oem: Windows only
            pass
    return sorted(names)


@lru_cache(maxsize=1)
def reference_count() -> int:
    return len(scan([str(REPO / "fixtures" / "analysis" / "guards.py")], settings=Settings(), use_cache=False).findings)


@FAST
@given(encoding=st.sampled_from(text_encodings()), word=st.text(alphabet="aéß€Жλ😀", min_size=1, max_size=6))
def test_every_declared_text_encoding_is_analysed_and_kept_by_fix(tmp_path_factory, encoding, word):
    text = f"# -*- coding: {encoding} -*-\n" + GUARDS.replace("Ways the", f"Ways {word} the", 1)
    data = None
    for errors in ("strict", "ignore"):
        try:
            data = text.encode(encoding, errors)
            break
        except (UnicodeError, LookupError):
            pass
    data = data if data is not None else text.encode("utf-8")  # "undefined", idna: bytes it cannot read
    path = tmp_path_factory.mktemp("enc") / "backend.py"
    path.write_bytes(data)
    result = scan([str(path)], settings=Settings(), use_cache=False)
    if not _compiles(data):  # Python refuses it: that file's error, said
        assert len(result.errors) == 1 and result.findings == []
        return
    assert result.errors == [] and len(result.findings) == reference_count()
    if not fix_targets([str(path)]):  # refused, with its reason: idna encodes no line over 63 characters
        from ddcheck.fix.transform import FixError, rewrite

        with pytest.raises(FixError, match="does not encode as"):
            rewrite(data, [f for f in result.findings if f.fix])
        assert path.read_bytes() == data
        return
    fixed = path.read_bytes()
    assert _compiles(fixed) and fixed != data
    fixed.decode(encoding)  # written back in its own encoding
    assert scan([str(path)], settings=Settings(), use_cache=False).errors == []


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                           max_leaves=8)
TOML_VALUES = st.recursive(st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                               st.sampled_from(["select", "ignore", "fail-on", "exclude", "x"]), inner, max_size=3),
                           max_leaves=8)


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if value == value and abs(value) != float("inf") else "inf"
    if isinstance(value, str):
        # TOML escapes no surrogate pairs; it forbids DEL unescaped, which JSON leaves as it is
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return "{" + ", ".join(f"{_toml(k)} = {_toml(v)}" for k, v in value.items()) + "}"


@FAST
@given(tool=TOML_VALUES, key=st.sampled_from(["tool", "tool.ddcheck", "tool.ddcheck.select",
                                              "tool.ddcheck.fail-on", "tool.ddcheck.exclude"]))
def test_settings_of_any_toml_type_load_or_say_which_key(tmp_path_factory, tool, key):
    from ddcheck.scan.settings import SettingsError, load_settings

    folder = tmp_path_factory.mktemp("toml")
    *table, name = key.split(".")
    (folder / "pyproject.toml").write_text((f"[{'.'.join(table)}]\n" if table else "") + f"{json.dumps(name)} = {_toml(tool)}\n")
    try:
        load_settings(folder)
    except SettingsError as exc:
        assert "pyproject.toml: tool" in str(exc)  # names the file, then the key


@FAST
@given(value=JSON_VALUES, where=st.sampled_from(["root", "findings", "entry", "count", "fingerprint"]))
def test_a_baseline_of_any_json_type_loads_or_is_a_baseline_error(tmp_path_factory, value, where):
    from ddcheck.diagnostics.baseline import BaselineError, load

    entry = {"fingerprint": "a", "count": 1}
    doc = {"version": 1, "tool": "ddcheck", "findings": [entry]}
    if where == "root":
        doc = value
    elif where == "findings":
        doc["findings"] = value
    elif where == "entry":
        doc["findings"] = [value]
    else:
        entry[where] = value
    path = tmp_path_factory.mktemp("bl") / "b.json"
    path.write_text(json.dumps(doc))
    try:
        counts = load(path)
    except BaselineError as exc:
        assert str(path) in str(exc)
    else:
        assert all(isinstance(n, int) and n >= 0 for n in counts.values())


@FAST
@given(value=JSON_VALUES, key=st.sampled_from(["speculative-algorithm", "model-path", "x", "1"]))
def test_a_launch_yaml_of_any_type_merges_or_is_a_parse_error(tmp_path_factory, value, key):
    import yaml

    from ddcheck.config.flags import ParseError, merge_config_file

    path = tmp_path_factory.mktemp("yaml") / "launch.yaml"
    path.write_text(yaml.safe_dump({key: value}) if value is not None else f"{key}: [{'[' * 1200}{']' * 1200}]\n")
    table = type("Table", (), {"flags": []})()
    try:
        argv = merge_config_file(table, ["--config", str(path)])
    except ParseError as exc:
        assert str(path) in str(exc)
    else:
        assert all(isinstance(a, str) for a in argv)


@pytest.mark.parametrize("encoding", ["latin-1", "cp1252", "iso-8859-15", "koi8-r", "unicode_escape"])
def test_named_encodings_are_in_the_sample(encoding):
    assert codecs.lookup(encoding).name in {codecs.lookup(n).name for n in text_encodings()}
