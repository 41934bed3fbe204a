"""``ddcheck fix``: rewrite the verify-path reads of C that ``scan`` found to the per-step width
(:mod:`.transform` applies a file's edits, :mod:`.runner` plans and writes them, :mod:`.command` is the
command's body, :mod:`.copying` makes ``--out`` copies, :mod:`.api` the public names)."""


def fix(paths, **kwargs):
    """Apply fixes; see :func:`ddcheck.fix.runner.fix_targets`."""
    from ddcheck.fix.runner import fix_targets

    return fix_targets(paths, **kwargs)
