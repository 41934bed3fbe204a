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
