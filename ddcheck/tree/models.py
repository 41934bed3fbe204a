"""Model folders the tree reads, where the reader itself cannot run here.

The tree reads a model's ``config.json`` and files through code that is often a stand-in on this
machine (``transformers`` not installed: ``AutoConfig.from_pretrained``, ``cached_file``). A call of
such a stand-in handed a *local* model folder is answered from the folder, as the real reader
would answer for it, by two rules that name no reader:

* a stand-in whose name mentions a config (and not a tokenizer's, a processor's...) handed a folder
  holding ``config.json``: that file's keys, as a config object (:class:`ModelConfig`);
* a stand-in handed a local folder and a file name: the file's path where the folder has it, else
  ``None`` (what the hub's readers answer for a local folder without it).

Everything else a stand-in is handed is left to the stand-in. Each answer is recorded in the
runtime's :class:`~ddcheck.tree.standins.Usage` (``answers``), so a report says what ddcheck read.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any, Callable

from ddcheck.tree.standins import ABSENT  # noqa: F401 - re-exported: the answerers' "no answer"

# A stand-in reads a model's config when its last two names mention a config and not one of these.
NOT_MODEL_CONFIG = ("generation", "processor", "tokenizer", "quant", "lora", "peft")
# What transformers' PretrainedConfig has for a model whose config.json does not say (its base class's
# attributes and __init__ defaults): a config read from a file answers these as transformers would.
CONFIG_BASE = {"model_type": "", "architectures": None, "is_encoder_decoder": False, "is_decoder": False,
               "tie_word_embeddings": True, "bos_token_id": None, "eos_token_id": None, "pad_token_id": None,
               "torch_dtype": None, "dtype": None, "name_or_path": "", "_name_or_path": "",
               "output_hidden_states": False, "output_attentions": False, "return_dict": True}
DTYPE_KEYS = ("torch_dtype", "dtype")


class NeedsInput(AttributeError):
    """The tree's code asked for something ddcheck does not have (a model config, the GPU).
    An AttributeError, so ``getattr(cfg, "x", default)`` in the tree takes its default."""


class ModelConfig:
    """A model's config as the tree reads it: ``config.json``'s keys as attributes (nested objects
    too), or an absent one (``data=None``: a hub id, nothing given), whose every attribute read is
    handed to ``need(what, supply)`` and raises :class:`NeedsInput`."""

    def __init__(self, label: str, data: dict | None, supply: str,
                 need: Callable[[str, str], None] | None = None):
        object.__setattr__(self, "_label", label)
        object.__setattr__(self, "_data", data)
        object.__setattr__(self, "_supply", supply)
        object.__setattr__(self, "_need", need)

    def _child(self, label: str, data: dict | None) -> ModelConfig:
        return ModelConfig(label, data, self._supply, self._need)

    def _missing(self, what: str) -> NeedsInput:
        if self._need is not None:
            self._need(f"{self._label}{what}", self._supply)
        return NeedsInput(f"{self._label} is not known to ddcheck (pass {self._supply})")

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        data = self._data
        if data is None:
            raise self._missing(f": `{attr}`")
        if attr in DTYPE_KEYS and attr not in data:  # transformers 5 reads torch_dtype as dtype
            attr = next((k for k in DTYPE_KEYS if k in data), attr)
        if attr in data:
            value = data[attr]
            if attr in DTYPE_KEYS and isinstance(value, str):
                return torch_dtype(value)
            return self._child(f"{self._label}.{attr}", value) if isinstance(value, dict) else value
        if attr in CONFIG_BASE and "." not in self._label:
            return CONFIG_BASE[attr]
        raise AttributeError(attr)

    def __setattr__(self, name: str, value: Any) -> None:  # the tree fills in derived fields
        if self._data is not None:
            self._data[name] = value

    def to_dict(self) -> dict:
        if self._data is None:
            raise self._missing(" (whole)")
        return dict(self._data)

    def __copy__(self):
        return self._child(self._label, None if self._data is None else dict(self._data))

    def __deepcopy__(self, memo):
        return self._child(self._label, None if self._data is None else copy.deepcopy(self._data, memo))

    def items(self):
        return self.to_dict().items()

    def keys(self):
        return self.to_dict().keys()

    def update(self, values: dict) -> None:
        for key, value in dict(values).items():
            setattr(self, key, value)

    def get_text_config(self, *args, **kwargs):  # transformers: a config without sub-configs is its own
        return self

    def get(self, key, default=None):
        try:
            return getattr(self, key)
        except AttributeError:
            return default

    def __contains__(self, key) -> bool:
        return self.get(key, None) is not None

    def __repr__(self) -> str:
        return f"<model config {self._label}>"


def torch_dtype(name: str) -> Any:
    """``"bfloat16"`` as transformers hands it over: the torch dtype, where torch is installed."""
    try:
        import torch
    except ImportError:
        return name
    value = getattr(torch, name, None)
    return value if isinstance(value, torch.dtype) else name


def path_arguments(args: tuple, kwargs: dict) -> list[str]:
    return [os.fspath(v) for v in (*args, *kwargs.values()) if isinstance(v, (str, os.PathLike))]


def local_config(path: str) -> dict | None:
    """The keys of ``path``'s ``config.json`` (``path`` a folder or that file), else None."""
    p = Path(path)
    try:
        if p.is_dir():
            p = p / "config.json"
        if p.suffix != ".json" or not p.is_file():
            return None
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def reads_config(name: str) -> bool:
    """Whether a stand-in of this dotted name reads a model's config (by its last two names)."""
    tail = ".".join(name.lower().split(".")[-2:])
    return "config" in tail and not any(w in tail for w in NOT_MODEL_CONFIG)


def as_read_by(reader: str, config: ModelConfig) -> Any:
    """A config as ``reader`` returns it: transformers' ``get_config_dict`` gives (dict, kwargs)."""
    if reader.endswith("config_dict"):
        return config.to_dict(), {}
    return config


def file_in_folder(args: tuple, kwargs: dict) -> Any:
    """For a stand-in handed a local folder and a relative file name: the file's path where the
    folder has it, else None; ``ABSENT`` when it was not handed such a pair."""
    strings = [os.fspath(v) for v in (*args, *kwargs.values()) if isinstance(v, (str, os.PathLike))]
    folder = next((s for s in strings if os.path.isabs(s) and os.path.isdir(s)), None)
    if folder is None:
        return ABSENT
    names = [s for s in strings if s != folder and s and not os.path.isabs(s) and "\n" not in s
             and os.path.normpath(s).split(os.sep)[0] != ".."]
    if not names:
        return ABSENT
    candidate = os.path.join(folder, names[0])
    return candidate if os.path.isfile(candidate) else None


class ModelFolders:
    """The answerer of a runtime's stand-ins (``Usage.answer``) for local model folders; see the
    module docstring. ``config(path, reader)`` may be overridden (``ddcheck config`` answers the
    launch's ``--model-config``/``--draft-config`` and a hub id's absent config its own way)."""

    def __call__(self, name: str, args: tuple, kwargs: dict) -> Any:
        if reads_config(name):
            for path in path_arguments(args, kwargs):
                answer = self.config(path, name)
                if answer is not ABSENT:
                    return answer
        return file_in_folder(args, kwargs)

    def config(self, path: str, reader: str) -> Any:
        data = local_config(path)
        if data is None:
            return ABSENT
        source = os.path.join(path, "config.json") if os.path.isdir(path) else path
        return as_read_by(reader, ModelConfig("the model's config", dict(data), source))
