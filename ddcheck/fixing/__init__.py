"""``ddcheck fix`` in three parts: ``transform`` (applies one file's planned text edits, checked with libcst), ``runner``
(plan over targets, re-scan, write), ``command`` (the CLI body). ``ddcheck.fixer`` re-exports them."""
