"""``ddcheck scan``: its Python API (:mod:`.api`), ``[tool.ddcheck]`` settings (:mod:`.settings`) and the
result cache (:mod:`.cache`)."""


def scan(paths=None, **kwargs):
    """Scan files, directories, wheels or ``sglang==VER``; returns a :class:`ddcheck.base.findings.ScanResult`."""
    from ddcheck.scan.api import scan as _scan

    return _scan(paths, **kwargs)
