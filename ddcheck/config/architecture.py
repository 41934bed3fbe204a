"""Whether a worker's model uses MLA, decided by the tree's own ``ModelConfig``.

A speculative worker builds its model's config as ``ModelConfig.from_server_args(server_args,
model_path=..., is_draft_model=...)`` (tp_worker.py, every release); ``ModelConfig`` decides the
attention architecture from the model's ``config.json`` (``self.attention_arch = AttentionArch.MLA`` for
the architectures it lists, 0.5.10 configs/model_config.py:436-560), and the runner picks a backend's
MLA module from it (``use_mla_backend``, 0.5.10 model_runner.py:344; attention_registry.py:27-41).

Here that call runs in the tree's runtime on the tree's ``ServerArgs`` after its start-up code, the
model's config answered from ``--model-config``/``--draft-config``, a local folder or the Hugging Face
cache (:mod:`ddcheck.config.treerun`); the line that set ``attention_arch`` is recorded. Where the config
is not known or the code cannot run here, the answer is None with why and what would decide it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from ddcheck.config.treerun import Where, _NoStartup, run_handler
from ddcheck.tree.names import (ATTENTION_ARCH_ATTR, ATTENTION_ARCH_CLASS, MLA_ARCH, MODEL_CONFIG_CLASS,
                                MODEL_CONFIG_FACTORY, MODEL_CONFIG_MODULE, MODEL_PATH, SPECULATIVE_DRAFT_MODEL_PATH)
from ddcheck.tree.runtime import Platform
from ddcheck.tree.sources import SourceTree
from ddcheck.tree.standins import is_stand_in


@dataclass
class Architecture:
    mla: bool | None  # None: not decided here (``why``)
    arch: str | None = None  # the tree's AttentionArch member's name
    at: str | None = None  # file:line that set attention_arch
    model: str | None = None  # the model path the config was built for
    why: str | None = None
    supply: list[str] = field(default_factory=list)  # what would decide it (--draft-config PATH)


def attention_arch(tree: SourceTree, values: dict[str, Any], draft_config: dict | None, model_config: dict | None,
                   gpu: str, platform: Platform, draft: bool = True) -> Architecture:
    """The attention architecture of the draft worker's model (``draft``) or the target's, for the
    server args ``values`` (as the tree's start-up code left them)."""
    out: dict[str, Any] = {}

    def entry(run, module, cls):
        mc_module = run.rt.import_module(MODEL_CONFIG_MODULE)
        mc_cls, arch_enum = getattr(mc_module, MODEL_CONFIG_CLASS, None), getattr(mc_module, ATTENTION_ARCH_CLASS, None)
        factory = getattr(mc_cls, MODEL_CONFIG_FACTORY, None)
        if mc_cls is None or arch_enum is None or is_stand_in(mc_cls) or is_stand_in(factory) or factory is None:
            raise _NoStartup(f"the tree's {MODEL_CONFIG_MODULE}.{MODEL_CONFIG_CLASS} is not defined here "
                             f"({run.rt.report.partial.get(MODEL_CONFIG_MODULE, 'a stand-in')})")

        def build(sa):
            path = getattr(sa, SPECULATIVE_DRAFT_MODEL_PATH if draft else MODEL_PATH, None)
            out["model"] = path
            wrote: list = []
            own = mc_cls.__dict__.get("__setattr__")
            base = mc_cls.__setattr__

            def record(self, name, value):
                if name == ATTENTION_ARCH_ATTR:
                    f = sys._getframe(1)
                    wrote.append(run.where_of(f.f_code.co_filename, f.f_lineno))
                base(self, name, value)

            mc_cls.__setattr__ = record
            try:
                config = factory(sa, model_path=path, is_draft_model=draft)
            finally:
                if own is None:
                    del mc_cls.__setattr__
                else:
                    mc_cls.__setattr__ = own
            arch = getattr(config, ATTENTION_ARCH_ATTR, None)
            out["arch"] = getattr(arch, "name", None)
            out["mla"] = arch == getattr(arch_enum, MLA_ARCH, object())
            out["at"] = next((str(w) for w in reversed(wrote) if w is not None), None)

        code = getattr(factory, "__code__", None)
        at = Where(run.rt.relpath_of(code.co_filename), code.co_firstlineno) if code is not None else None
        return build, at

    run = run_handler(tree, values, draft_config, model_config, gpu=gpu, platform=platform, entry=entry)
    model = out.get("model")
    if "mla" in out and run.ok and not run.rejected:
        return Architecture(out["mla"], out["arch"], out["at"], model)
    why = run.failed or (f"the tree's {MODEL_CONFIG_CLASS} refused the model: {run.rejected} (at {run.rejected_at})"
                         if run.rejected else "the tree's model config could not be built here")
    return Architecture(None, model=model, why=why, supply=list(dict.fromkeys(n.supply for n in run.needs if n.supply)))
