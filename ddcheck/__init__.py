"""ddcheck: keep SGLang's speculative-decoding verify path from laying out batches with a width
fixed at start-up. Python API: :func:`scan`, :func:`fix`, :func:`check_launch`."""

__version__ = "0.1.0"


def scan(paths=None, **kwargs):
    """Scan files, directories, wheels or ``sglang==VER``; returns a :class:`ddcheck.findings.ScanResult`."""
    from .api import scan as _scan

    return _scan(paths, **kwargs)


def fix(paths, **kwargs):
    """Apply fixes; see :func:`ddcheck.fixer.fix_targets`."""
    from .fixer import fix_targets

    return fix_targets(paths, **kwargs)


def check_launch(argv, sglang=None, file=None):
    """Validate an SGLang launch command before it runs; returns a ``ddcheck.launch.Report``."""
    from .launch import check_launch as _check

    return _check(argv, sglang=sglang, file=file)
