"""``ddcheck audit``: the target x backend x width matrix of verdicts, before and after the default fix.

Modules by role: :mod:`~ddcheck.audit.targets` (targets and version ranges, expanded against the package
index), :mod:`~ddcheck.audit.cells` (the record and its JSON schema, shipped as ``schema.json``),
:mod:`~ddcheck.audit.prep` (a target's scan and fix), :mod:`~ddcheck.audit.verdicts` (cells from what
the commands found), :mod:`~ddcheck.audit.store` (the cache), :mod:`~ddcheck.audit.runner` (the work, in
parallel), :mod:`~ddcheck.audit.grid` and the renderers (:mod:`~ddcheck.audit.text`,
:mod:`~ddcheck.audit.markdown`, :mod:`~ddcheck.audit.html`), :mod:`~ddcheck.audit.command` (the CLI body).
"""

from ddcheck.audit.cells import AuditRecord, Cell, Width

__all__ = ["AuditRecord", "Cell", "Width"]
