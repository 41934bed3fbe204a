"""Shared fixtures: real SGLang wheels, downloaded once per machine with pip (PyPI is reachable from CI)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("DDCHECK_CACHE", str(Path.home() / ".cache" / "ddcheck"))


@pytest.fixture(scope="session")
def wheel():
    """``wheel("0.5.10") -> Path`` of the real sglang wheel, cached under DDCHECK_CACHE."""
    from ddcheck.sources import download_wheel

    cache: dict[str, Path] = {}

    def get(version: str) -> Path:
        if version not in cache:
            cache[version] = download_wheel(version)
        return cache[version]

    return get


@pytest.fixture(scope="session")
def release_scan(wheel):
    """``release_scan("0.5.10") -> ScanResult`` of the whole wheel, computed once per session."""
    from ddcheck.api import scan
    from ddcheck.settings import Settings

    results = {}

    def get(version: str):
        if version not in results:
            results[version] = scan([str(wheel(version))], settings=Settings())
        return results[version]

    return get
