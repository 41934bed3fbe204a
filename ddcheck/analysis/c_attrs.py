"""What a class of the tree holds of C: the ``self`` attributes that carry it and the buffers laid out
with it (:class:`~ddcheck.analysis.module.ClassFacts`), worked out once per module."""

from __future__ import annotations

from collections.abc import Callable

from ddcheck.analysis.module import ClassFacts, ModuleModel
from ddcheck.analysis.vocabulary import Vocabulary


class ClassAttrs:
    """The fact of what each class holds of C. ``inherited``: attributes a class may read that a base in
    another module set from C (``self.num_draft_tokens``); ``load``: a dotted module name -> its model (the
    helpers of other modules a class hands C to)."""

    def __init__(self, vocab: Vocabulary, inherited: frozenset[str] = frozenset(),
                 load: Callable[[str], ModuleModel | None] | None = None) -> None:
        self._vocab, self._inherited, self._load = vocab, inherited, load
        self._tables: dict[int, dict[str, ClassFacts]] = {}  # module model id -> class -> facts

    def facts(self, model: ModuleModel, cls: str | None) -> ClassFacts:
        """What ``cls`` of ``model`` holds of C (None: module level, where only the vocabulary's names do)."""
        table = self._tables.get(id(model))
        if table is None:
            table = self._tables[id(model)] = model.class_c_attrs(self._vocab, self._inherited, self._load)
        vocab = self._vocab
        if cls is None:
            extra = set(vocab.extra_c_attrs) | set(vocab.c_source_attrs)
            return ClassFacts(extra, extra, {})
        default = set(self._inherited) | set(vocab.extra_c_attrs) | set(vocab.c_source_attrs)
        return table.get(cls) or ClassFacts(default, default, {})

    def c_attrs_of(self, model: ModuleModel, cls: str | None, exact: bool = False) -> set[str]:
        """``self.X`` attributes of ``cls`` that hold C (with ``exact``: those that are copies of C)."""
        f = self.facts(model, cls)
        return f.exact if exact else f.c_attrs
