"""``ddcheck fix`` in three parts: ``transform`` (libcst applies one file's planned edits), ``runner``
(plan over targets, re-scan, write), ``command`` (the CLI body). ``ddcheck.fixer`` re-exports them."""
