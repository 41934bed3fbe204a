"""``ddcheck fix``: rewrite the verify-path reads of C that ``scan`` found to the per-step width.

The work is in :mod:`ddcheck.fix`: ``transform`` (applies one file's planned text edits, checked with libcst),
``runner`` (plan over targets, re-scan, atomic writes, the entry points tests, smoke and
``ddcheck config`` use) and ``command`` (the CLI body). This module keeps their public names where
callers have always found them.
"""

from __future__ import annotations

from ddcheck.fix.command import BACKUP_SUFFIX, fix_main
from ddcheck.fix.runner import FileFix, fix_targets, fix_tree, fixable, fixed_file_text, plan, verify_fixes, write_atomic
from ddcheck.fix.transform import FixError, rewrite

__all__ = ["BACKUP_SUFFIX", "FileFix", "FixError", "fix_main", "fix_targets", "fix_tree", "fixable",
           "fixed_file_text", "plan", "rewrite", "verify_fixes", "write_atomic"]
