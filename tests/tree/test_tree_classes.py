"""What an instance of a tree class has, answered from the class's own source (ddcheck/tree/classes.py):
its ``__init__``'s expressions over the values an object holds, its parameters' defaults, calls of its
module's own names (issue 42: the smoke harness spells none of these)."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

from ddcheck.tree.classes import init_value
from ddcheck.tree.standins import ABSENT

SOURCE = '''
class Quant:
    name = "plain"


def page_of(args):
    return args.page_size * 2


class Pool:
    def __init__(self, size, args, ps, logit_cap=0.5, quant=None):
        self.size = size
        self.page = page_of(args)
        self.cap = logit_cap
        self.quant = quant if quant is not None else Quant()
        self.ps = ps
        self.rank = ps.rank
        self.cache: object = _UNSET

    def load(self):
        self.model = load_it(self.size)
        self.swa = hasattr(self.model, "window") and self.model.window()
        self.twice = self.size
        self.twice = self.size * 2


_UNSET = object()
'''


@pytest.fixture
def module(tmp_path, monkeypatch):
    (tmp_path / "ddcheck_tree_classes_fixture.py").write_text(textwrap.dedent(SOURCE), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module("ddcheck_tree_classes_fixture")
    sys.modules.pop("ddcheck_tree_classes_fixture", None)


class Held:
    """An object holding some of ``__init__``'s parameters; a read of any other one answers from the class."""

    def __init__(self, cls, **values):
        self.__dict__.update(values)
        self._cls = cls

    def __getattr__(self, name):
        value = init_value(self._cls, name, self, held=self.__dict__.__contains__)
        if value is ABSENT:
            raise AttributeError(name)
        return value


def test_init_expressions_parameters_defaults_and_the_modules_calls(module):
    obj = Held(module.Pool, size=7, args=type("Args", (), {"page_size": 3})())
    assert init_value(module.Pool, "size", obj) == 7
    assert init_value(module.Pool, "page", obj) == 6  # page_of(args): the module's own function
    assert init_value(module.Pool, "cap", obj, held=obj.__dict__.__contains__) == 0.5  # the default
    quant = init_value(module.Pool, "quant", obj, held=obj.__dict__.__contains__)
    assert isinstance(quant, module.Quant)  # ``quant if quant is not None else Quant()``: the default is None


def test_a_parameter_answered_by_itself_is_no_answer(module):
    """``self.ps = ps`` with no ``ps`` held: reading it would read itself again."""
    obj = Held(module.Pool, size=1)
    assert init_value(module.Pool, "ps", obj, held=obj.__dict__.__contains__) is ABSENT
    assert init_value(module.Pool, "rank", obj, held=obj.__dict__.__contains__) is ABSENT


def test_an_attribute_one_statement_assigns_anywhere_in_the_class(module):
    """``self.swa = hasattr(self.model, ...) and ...`` in a method that needs what is not here (load_it):
    that one statement, over the object's values; an attribute assigned twice is not answered so."""
    obj = Held(module.Pool, size=3, model=object())
    assert init_value(module.Pool, "swa", obj) is False
    assert init_value(module.Pool, "twice", obj) is ABSENT
    assert init_value(module.Pool, "cache", obj) is module._UNSET  # ``self.cache: object = _UNSET``


# --- what a Recording like a tree class answers (issue 47: recordings answer only what they hold)

def test_a_recording_answers_what_the_class_declares_and_nothing_else(module):
    """A name the tree's class never declares is absent, as on its instance: ``hasattr`` is False and
    ``getattr(x, name, default)`` takes the default (a backend's ``if hasattr(model_runner, ...)``)."""
    from ddcheck.smoke.loader import Recording, Trace

    r = Recording("pool", Trace(), module.Pool, size=7, args=type("Args", (), {"page_size": 3})())
    assert not hasattr(r, "attention_chunk_size") and getattr(r, "attention_chunk_size", 7) == 7
    assert r.size == 7 and r.page == 6 and hasattr(r, "page")  # handed, and what __init__ derives from it


RUNNER_TREE = {
    "sglang/__init__.py": "",
    "sglang/srt/__init__.py": "",
    "sglang/srt/config.py": '''
class Config:
    def __init__(self, chunk=None):
        self.chunk = chunk
''',
    "sglang/srt/runner.py": '''
import json

from sglang.srt.config import Config

DOUBLE = 2


class Base:
    kind = "base"

    def __init__(self, server_args):
        self.page = server_args.page_size * DOUBLE


_PROBED = json.no_such_probe()  # what this machine's package lacks: the module stops here


class Runner(Base):
    size: int = 4

    def __init__(self, config: Config, server_args, window=None):
        super().__init__(server_args)
        self.chunk = config.chunk
        self.window = window

    def load(self):
        self.weights = Config()

    def unload(self):
        self.weights = None


from json import JSONDecoder as Decoder  # never runs here


class Coded(json.JSONEncoder):  # a base outside the tree, reached through the module's names
    pass


class Decoded(Decoder):  # one its names do not reach: unread
    pass
''',
}


@pytest.fixture
def stopped_runner(tmp_path):
    """The class ``Runner`` of a tree whose module stops while imported before its class statement, read
    inside the tree's runtime: (the class, a recording like it holding a config and server args, its trace)."""
    from types import SimpleNamespace

    from ddcheck.smoke.loader import LoadContext, Recording, SglangImporter, tree_class
    from ddcheck.tree.sources import open_target

    for rel, text in RUNNER_TREE.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(textwrap.dedent(text), encoding="utf-8")
    with SglangImporter(open_target(str(tmp_path)), LoadContext(device="cpu", num_draft_tokens=8,
                                                                num_steps=7)) as importer:
        config = importlib.import_module("sglang.srt.config").Config(chunk=None)
        cls = tree_class("sglang.srt.runner", "Runner")
        runner = Recording("runner", importer.trace, cls, config=config,
                           server_args=SimpleNamespace(page_size=3))
        yield cls, runner, importer.trace


def line_of(text: str, rel: str = "sglang/srt/runner.py") -> int:
    return textwrap.dedent(RUNNER_TREE[rel]).splitlines().index(text) + 1


def test_a_class_whose_module_stopped_is_read_from_its_source(stopped_runner):
    from ddcheck.tree.classes import WrittenClass

    cls, runner, trace = stopped_runner
    assert isinstance(cls, WrittenClass) and cls.name == "Runner" and cls.line == line_of("class Runner(Base):")
    assert "json" in cls.stopped and "no_such_probe" in cls.to_run  # why it stopped, what would run it
    # undeclared: absent, as on the tree's instance
    assert not hasattr(runner, "attention_chunk_size")
    assert getattr(runner, "attention_chunk_size", 7) == 7
    # declared: its __init__'s expressions over what it holds, its defaults, its class values, its built
    # base's (whose __init__ reads a global of the module, defined before it stopped)
    assert hasattr(runner, "chunk") and runner.chunk is None
    assert runner.window is None and runner.size == 4 and runner.kind == "base" and runner.page == 6


def test_a_declared_name_with_no_value_here_is_a_recorded_stand_in(stopped_runner):
    """A method of a class that was never built, or an attribute two methods set: declared, so a stand-in
    answers it, recorded as missing."""
    from ddcheck.tree.standins import is_stand_in

    _, runner, trace = stopped_runner
    assert is_stand_in(runner.load) and is_stand_in(runner.weights)
    assert {"load", "weights"} <= trace.missing["runner"]


def test_the_stopped_module_of_a_handed_class_is_named(stopped_runner):
    """The report's entry (``harness.from_source``) and limitation line name the module that stopped, why,
    and what would make it run."""
    from ddcheck.smoke.loader import from_source_note

    _, _, trace = stopped_runner
    entry = trace.from_source["runner"]
    assert entry["module"] == "sglang.srt.runner"
    assert entry["defined_at"] == f"sglang/srt/runner.py:{line_of('class Runner(Base):')}"
    stop = line_of("_PROBED = json.no_such_probe()  # what this machine's package lacks: the module stops here")
    assert "AttributeError" in entry["stopped"] and f"sglang/srt/runner.py:{stop}" in entry["stopped"]
    note = from_source_note("runner", entry)
    assert "sglang.srt.runner stopped while imported" in note and entry["to_run"] in note


def test_bases_outside_the_tree_answer_where_they_are_reached(stopped_runner):
    """A base outside the tree that the module's names reach (``json.JSONEncoder``) answers as a class does;
    one they do not (bound after the module stopped) is unread: a name the class does not declare may be
    its, so a recorded stand-in answers, and the report names the base."""
    from ddcheck.smoke.loader import Recording, tree_class
    from ddcheck.tree.standins import is_stand_in

    _, _, trace = stopped_runner
    coded = Recording("coded", trace, tree_class("sglang.srt.runner", "Coded"))
    assert coded.item_separator == ", " and not hasattr(coded, "attention_chunk_size")
    cls = tree_class("sglang.srt.runner", "Decoded")
    decoded = Recording("decoded", trace, cls)
    assert cls.unread == ["Decoder"] and is_stand_in(decoded.attention_chunk_size)
    assert trace.from_source["decoded"]["unread_bases"] == ["Decoder"]


TUPLE_KEEPER = '''
class Keeper:
    def init(self, a, b):
        self.meta = (first, second, third)

    def use(self):
        (_, second, third) = self.meta
        return second

class Unnamed:
    def init(self):
        self.meta = (1, x, y)

class Disagrees:
    def init(self):
        self.meta = (a, b)

    def use(self):
        b, a = self.meta
'''


def test_a_tuple_kept_on_self_is_named_by_the_classs_own_source(tmp_path, monkeypatch):
    import importlib

    from ddcheck.tree.classes import tuple_fields

    (tmp_path / "ddcheck_tuple_keeper.py").write_text(TUPLE_KEEPER)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("ddcheck_tuple_keeper")
    try:
        assert tuple_fields(module.Keeper, "meta") == (("first", "second", "third"), "ddcheck_tuple_keeper:4")
        assert tuple_fields(module.Keeper, "other") is None
        assert tuple_fields(module.Unnamed, "meta") is None  # a position no statement names
        assert tuple_fields(module.Disagrees, "meta") is None  # two statements name one position two ways
    finally:
        sys.modules.pop("ddcheck_tuple_keeper", None)
