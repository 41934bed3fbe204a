"""ddcheck: keep SGLang's speculative-decoding verify path from laying out batches with a width
fixed at start-up. Python API: :func:`scan`, :func:`fix`, :func:`check_launch`, and what they return
(:class:`ScanResult` of :class:`Finding` s, :class:`Severity`).

``scan`` and ``fix`` are both a command's package and its function: importing the function here binds the
name to it (the package stays importable as ``ddcheck.scan.api``, ``from ddcheck.fix import runner``)."""

from ddcheck.base import __version__  # noqa: F401 - the package's version
from ddcheck.base.findings import Finding, ScanResult, Severity  # noqa: F401 - what the API returns
from ddcheck.fix import fix  # noqa: F401
from ddcheck.scan import scan  # noqa: F401


def check_launch(argv, sglang=None, file=None):
    """Validate an SGLang launch command before it runs; returns a ``ddcheck.config.Report``."""
    from ddcheck.config import check_launch as _check

    return _check(argv, sglang=sglang, file=file)
