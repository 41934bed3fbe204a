"""Put a bench script's printed table into its docs page, between the page's markers
(:func:`ddcheck.audit.markdown.write_between`, which `ddcheck audit`'s tables go through too)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ddcheck.audit.markdown import write_between  # noqa: E402

__all__ = ["write_between"]
