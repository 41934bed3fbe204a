"""Put a bench script's printed table into its docs page, between the page's markers."""

from __future__ import annotations

from pathlib import Path


def write_between(doc: Path, begin: str, end: str, text: str, new_page: str = "") -> None:
    """Replace what stands between ``begin`` and ``end`` in ``doc`` with ``text``; a page without the
    markers gets them at its end (a missing page is ``new_page`` followed by them)."""
    page = doc.read_text(encoding="utf-8") if doc.is_file() else new_page
    if begin not in page:
        page += ("\n" if page and not page.endswith("\n\n") else "") + f"{begin}\n{end}\n"
    head, _, rest = page.partition(begin)
    _, _, tail = rest.partition(end)
    doc.write_text(f"{head}{begin}\n{text.rstrip(chr(10))}\n{end}{tail}", encoding="utf-8")
