"""ddcheck.tree.runtime: the tree's own code runs; stand-ins only for what cannot run, reported."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from ddcheck.tree.sources import open_target
from ddcheck.tree.runtime import Platform, TreeRuntime
from ddcheck.tree.standins import is_stand_in, last_call

PROBE = Path(__file__).resolve().parents[2] / "fixtures" / "trees" / "runtime_probe"
KERNELS = PROBE / "sglang" / "srt" / "ops" / "kernels.py"


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_the_tree_runs_and_only_what_cannot_run_stands_in():
    rt = TreeRuntime(open_target(str(PROBE)), Platform(device="cpu"))
    with rt:
        backend_mod = rt.import_module("sglang.srt.nsless.backend")
        import sglang

        assert sglang.PACKAGE_INIT_RAN is True  # the package's own __init__ ran
        out = backend_mod.Backend().verify(SimpleNamespace(draft_token_num=17))
        # the tree's helpers ran for real, through a relative import: (17 + 1) * 3
        assert out[0] == 54
        assert out[2] == "defined before the failure"
        # the extension's kernel is a stand-in: called, recorded with the tree line that called it
        assert is_stand_in(out[1])
        assert last_call(sys.modules["ddcheck_absent_ext"].ops.run_kernel) == ((17,), {"block": 128})
    report = rt.report
    assert "ddcheck_absent_ext" in report.stand_in_modules
    assert report.usage.calls == [("ddcheck_absent_ext.ops.run_kernel",
                                   f"sglang/srt/ops/kernels.py:{line_of(KERNELS, 'run_kernel(')}")]
    # the decorator applied at import left the function as written, and was not counted as a run call
    assert [n for n, _ in report.usage.decorators] == ["ddcheck_absent_ext.ops.jit_compile"]
    # the module that raised halfway is kept as far as it ran, the failure reported at its line
    halfway = PROBE / "sglang" / "srt" / "halfway.py"
    assert report.partial["sglang.srt.halfway"] == (
        f"RuntimeError: no NVML on this machine (at sglang/srt/halfway.py:{line_of(halfway, 'raise RuntimeError')})")
    assert "sglang.srt.helpers" in report.modules_run and "sglang.srt.nsless.backend" in report.modules_run
    assert not report.absent


def test_nothing_is_left_behind():
    before = set(sys.modules)
    with TreeRuntime(open_target(str(PROBE)), Platform(device="cpu")) as rt:
        rt.import_module("sglang.srt.nsless.backend")
    assert not {m for m in set(sys.modules) - before if m.split(".")[0] in ("sglang", "ddcheck_absent_ext")}


def test_an_import_outside_the_tree_is_not_stood_in():
    # Only the tree's code gets stand-ins: ddcheck's (or the user's) own failing import still fails.
    with TreeRuntime(open_target(str(PROBE)), Platform(device="cpu")):
        with pytest.raises(ImportError):
            import ddcheck_absent_ext_2  # noqa: F401


def test_stand_ins_are_falsy_and_empty_and_subclassable():
    from ddcheck.tree.standins import Usage, stand_in

    usage = Usage()
    s = stand_in("ext.Thing", usage)
    assert not s and len(s) == 0 and list(s) == []

    class Real(s):  # a tree class deriving from a stand-in base is a real class
        def __init__(self, x):
            super().__init__(x)
            self.x = x

    assert Real(3).x == 3 and bool(Real)
    assert int(s.size) == 1 and usage.numbers == [("ext.Thing.size", "?")]


def test_platform_probes_answer_for_the_emulated_gpu():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a real GPU answers for itself")
    with TreeRuntime(open_target(str(PROBE)), Platform(arch="sm100", device="cpu")) as rt:
        assert torch.cuda.is_available() and torch.cuda.get_device_capability() == (10, 0)
        assert torch.version.cuda
        with rt.this_machine():  # start-up state that allocates is made for the device that exists here
            assert not torch.cuda.is_available() and torch.version.cuda is None
        assert torch.cuda.is_available()
    assert not torch.cuda.is_available() and torch.version.cuda is None
    with TreeRuntime(open_target(str(PROBE)), Platform(device="cpu", emulate=False)):
        assert not torch.cuda.is_available()  # kernels that run here take this machine's paths


COMPILED = '''import sys
import torch

@torch.compile(dynamic=True)
def double(x):
    return x * 2

@torch.compiler.disable
def inc(x):
    return x + 1

@torch._dynamo.disable
def neg(x):
    return -x

DYNAMO_AT_IMPORT = "torch._dynamo" in sys.modules
'''


def test_torch_compiler_decorators_wrap_a_function_when_it_is_first_called(tmp_path):
    """A tree module that decorates functions with torch.compile, torch.compiler.disable or
    torch._dynamo.disable does not import torch's dynamo while it is imported (seconds of a config
    run); a decorated function that is called is wrapped by torch's own decorator then and runs."""
    pytest.importorskip("torch")
    import subprocess

    (tmp_path / "sglang").mkdir()
    (tmp_path / "sglang" / "__init__.py").write_text("")
    (tmp_path / "sglang" / "compiled.py").write_text(COMPILED)
    code = f'''import sys
import torch
from ddcheck.tree.runtime import Platform, TreeRuntime
from ddcheck.tree.sources import open_target
assert "torch._dynamo" not in sys.modules
with TreeRuntime(open_target({str(tmp_path / "sglang")!r}), Platform(device="cpu")) as rt:
    m = rt.import_module("sglang.compiled")
    print("at import", m.DYNAMO_AT_IMPORT, "torch._dynamo" in sys.modules)
    print("names", m.double.__name__, m.inc.__name__, m.neg.__name__)
    print("called", m.inc(1), m.neg(2), "torch._dynamo" in sys.modules)
print("after", type(torch._dynamo).__name__, torch.compile.__module__)
'''
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["at import False False", "names double inc neg", "called 2 -2 True",
                                       "after module torch"]


def test_a_tree_import_under_a_profile_hook_still_gets_its_stand_ins():
    """With the imports unprofiled (a start-up run watched by a profile hook), the import system's frames
    are still seen through: what the tree's code imports and cannot be imported here is a stand-in."""
    from ddcheck.tree.runtime import UnprofiledImports

    before = sys.getprofile()
    with TreeRuntime(open_target(str(PROBE)), Platform(device="cpu")) as rt, UnprofiledImports():
        sys.setprofile(lambda frame, event, arg: None)
        try:
            backend_mod = rt.import_module("sglang.srt.nsless.backend")
        finally:
            sys.setprofile(before)
        assert backend_mod.Backend().verify(SimpleNamespace(draft_token_num=17))[0] == 54
    assert "ddcheck_absent_ext" in rt.report.stand_in_modules


def test_a_name_an_installed_package_lacks_is_a_stand_in_where_the_tree_does_not_guard_its_import():
    """The name-level twin of a module that cannot be imported here: the statement gets a recorded
    stand-in, the module runs on; a guarded import (a probe) sees what the package really has."""
    import json

    lacking = PROBE / "sglang" / "srt" / "lacking.py"
    with TreeRuntime(open_target(str(PROBE)), Platform(device="cpu")) as rt:
        module = rt.import_module("sglang.srt.lacking")
        assert module.AFTER == "ran past the import" and "sglang.srt.lacking" not in rt.report.partial
        assert module.HAS_ANOTHER is False and module.probe() is False
        assert is_stand_in(module.no_such_name_for_ddcheck) and module.dumps is json.dumps
        assert is_stand_in(module.use())
        assert not hasattr(json, "no_such_name_for_ddcheck")  # the package itself is untouched
    where = f"sglang/srt/lacking.py:{line_of(lacking, 'import dumps, no_such_name_for_ddcheck')}"
    assert rt.report.lacked == [f"json.no_such_name_for_ddcheck (the json installed here has no such name; "
                                f"imported at {where})"]
    assert rt.report.usage.calls == [("json.no_such_name_for_ddcheck", f"sglang/srt/lacking.py:{line_of(lacking, 'return no_such')}")]
    assert any(x.startswith("stand-in for json.no_such_name_for_ddcheck") for x in rt.report.limitations())


@pytest.mark.parametrize("source, guarded", [
    ("try:\n    from a import b\nexcept ImportError:\n    pass\n", {2}),
    ("try:\n    import a\nexcept (ValueError, ModuleNotFoundError):\n    pass\n", {2}),
    ("try:\n    import a\nexcept:\n    pass\n", {2}),
    ("try:\n    import a\nexcept builtins.Exception:\n    pass\n", {2}),
    ("try:\n    import a\nexcept ValueError:\n    pass\n", set()),
    ("try:\n    pass\nexcept ImportError:\n    import a\nelse:\n    import b\nfinally:\n    import c\n", set()),
    # a function defined in the try runs when called, outside it; a try inside it guards its own body
    ("try:\n    def f():\n        import a\nexcept ImportError:\n    pass\n", set()),
    ("def f():\n    try:\n        if x:\n            from a import b\n    except ImportError:\n        pass\n", {4}),
    ("import a\n", set()),
])
def test_guarded_imports(source, guarded):
    import ast

    from ddcheck.tree.lacking import guarded_lines

    assert guarded_lines(ast.parse(source)) == guarded


def test_the_tree_import_passes_over_what_is_no_installed_package(monkeypatch):
    """sys.modules may hold any object, and a lazy module's ``__getattr__`` may raise anything: the import
    statement then meets Python's own answer, never ddcheck's error."""
    import types

    from ddcheck.tree.lacking import tree_import
    from ddcheck.tree.standins import Usage

    lacked: list[str] = []
    imp = tree_import(lambda f: True, lambda f, line: False, "sglang", Usage(), lacked, lambda frame: "here")

    class Lazy(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)  # not a package: the import system asks no name of it
            raise RuntimeError("a lazy module's own failure")

    not_a_module = object()
    monkeypatch.setitem(sys.modules, "ddcheck_not_a_module", not_a_module)
    monkeypatch.setitem(sys.modules, "ddcheck_lazy_module", Lazy("ddcheck_lazy_module"))
    assert imp("ddcheck_not_a_module", {}, {}, ("anything",), 0) is not_a_module
    assert imp("ddcheck_lazy_module", {}, {}, ("anything",), 0) is sys.modules["ddcheck_lazy_module"]
    assert lacked == []
    stood = imp("json", {}, {}, ("dumps", "ddcheck_absent_name"), 0)  # an unguarded import in the tree
    assert stood.dumps is __import__("json").dumps and is_stand_in(stood.ddcheck_absent_name)
    assert lacked and lacked[0].startswith("json.ddcheck_absent_name (the json installed here")
