"""A model named by its Hugging Face hub id (``--model-path org/name``), found where SGLang finds it.

SGLang hands a hub id to its config readers, which read ``config.json`` from the Hugging Face cache
(``HF_HUB_CACHE``, else ``HF_HOME/hub``: ``models--org--name/snapshots/<rev>/config.json``) or download
it. ddcheck does the same through ``huggingface_hub``: the cache first, then, only when the network is
allowed (``ddcheck config --allow-downloads``, and ``HF_HUB_OFFLINE`` unset), a download of ``config.json``
alone. The file is read as data:
code it names (``auto_map``, remote code) never runs.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
TRUE = ("1", "true", "yes", "on")


class HubError(Exception):
    """A hub id whose config cannot be had here (not cached and offline, not downloadable)."""


@dataclass
class HubConfig:
    data: dict
    path: str


def cache_dir() -> str:
    """The hub cache as the environment names it now (read at each call, not at import)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                     os.path.join(os.path.expanduser("~"), ".cache"), "huggingface")
    return os.path.join(home, "hub")


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in TRUE


def reachable(timeout: float = 3.0) -> bool:
    """Whether the hub's endpoint (``HF_ENDPOINT``) answers a connection now: without it a download
    would only retry (seconds each) before failing."""
    import socket
    from urllib.parse import urlparse

    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    try:
        socket.create_connection((url.hostname or "", url.port or (443 if url.scheme == "https" else 80)),
                                 timeout=timeout).close()
    except OSError:
        return False
    return True


def is_hub_id(path: str) -> bool:
    return bool(HUB_ID.fullmatch(path)) and not os.path.exists(path)


def hub_config(path: str, revision: str | None = None) -> HubConfig | None:
    """``path``'s ``config.json`` when it is a hub id (None when it is not one); :class:`HubError`
    when it is one whose config cannot be had here."""
    if not isinstance(path, str) or not is_hub_id(path):
        return None
    from huggingface_hub import hf_hub_download, try_to_load_from_cache

    cache = cache_dir()
    try:
        found = try_to_load_from_cache(path, "config.json", cache_dir=cache, revision=revision)
    except Exception as exc:  # noqa: BLE001 - an id the hub library refuses
        raise HubError(f"{path}: not a hub id ddcheck can look up ({exc})") from exc
    if not isinstance(found, str):
        if offline():
            from ddcheck.config.offline import GUARD, WHY

            why = WHY if "HF_HUB_OFFLINE" in GUARD.set_by_ddcheck else "HF_HUB_OFFLINE is set"
            raise HubError(f"{path}: its config.json is not in the Hugging Face cache ({cache}) and {why}, so it "
                           "is not downloaded")
        if not reachable():
            raise HubError(f"{path}: its config.json is not in the Hugging Face cache ({cache}) and the hub cannot "
                           "be reached from here to download it")
        try:
            found = hf_hub_download(path, "config.json", revision=revision, cache_dir=cache)
        except Exception as exc:  # noqa: BLE001 - no network, no such repo, gated: said, not raised
            raise HubError(f"{path}: its config.json is not in the Hugging Face cache ({cache}) and could not "
                           f"be downloaded ({type(exc).__name__})") from exc
    try:
        data = json.loads(Path(found).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise HubError(f"{path}: {found} is not a readable JSON config ({exc})") from exc
    if not isinstance(data, dict):
        raise HubError(f"{path}: {found} is not a JSON object")
    return HubConfig(data, str(found))
