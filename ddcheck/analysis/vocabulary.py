"""The names the analysis recognises: where C comes from, what carries W, what is harmless.

Everything here can be extended from ``[tool.ddcheck]`` (see :mod:`ddcheck.scan.settings`), so a fork
that renames the attribute does not need a new ddcheck release.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

# SGLang's names (ddcheck.tree.names): attribute names whose value *is* the start-up width C,
# whatever object they hang off; attribute names that carry the per-step width W of the verify input;
# its width fields, newest first (what the guard and smoke read W from); functions whose whole body is
# the verify path.
from ddcheck.tree.names import (C_SOURCE_ATTRS, NUM_TOKENS_PER_REQ, PER_STEP_ATTRS, TARGET_VERIFY,
                            VERIFY_FUNCTION_MARKERS, WIDTH_FIELDS)

# Words that name a width in an identifier (a `num_draft_tokens=None` parameter, an attribute named
# `target_verify_num_draft_tokens`).
WIDTH_WORDS = ("draft_token", "num_tokens", "tokens_per_req", "width", "q_len", "verify_len")

# Names a fix writes: the local bound to W at the top of a verify block, and the parameter through
# which a helper receives W from its callers.
FIX_LOCAL = NUM_TOKENS_PER_REQ
FIX_PARAMETER = "verify_width"

# Calls whose result is per-step (helpers that read W from the verify input).
PER_STEP_CALL_MARKERS = WIDTH_FIELDS

# A function named with this word builds or runs the verify step (``build_eagle_verify_input``): where a
# buffer another class hands out (through an accessor) is written for the step.
VERIFY_STEP_WORD = "verify"

# Forward-mode predicates; a function that tests any of them decides its own verify path.
MODE_PREDICATE_PREFIX = "is_"
VERIFY_ENUM_MEMBERS = frozenset({TARGET_VERIFY})

# Names assigned an upper bound (wrong only when W > C).
UPPER_BOUND_NAMES = frozenset({"max_seq_len_k", "max_seqlen_k", "max_kv_len", "max_seq_len_kv"})

# Calls that only check their arguments (leading underscores aside): a size they are handed lays
# nothing out (``assert_buffer_fits(seq_lens_sum + C * bs, ...)``).
CHECK_CALL_PREFIXES = ("assert", "check_", "validate", "ensure_")

# Allocators: C in the *size* argument is capacity (warning), in a fill value it is content.
ALLOCATORS = frozenset({
    "zeros", "empty", "ones", "full", "randn", "rand", "new_zeros", "new_empty", "new_ones",
    "new_full", "zeros_like", "empty_like",
})
FILL_ALLOCATORS = frozenset({"full", "new_full"})

# Calls that only report a value.
REPORTING_CALLS = frozenset({
    "print", "debug", "info", "warning", "warn", "error", "exception", "critical", "log",
    "format", "repr", "str", "print_warning_once", "warning_once", "info_once",
})


@dataclass(frozen=True)
class Vocabulary:
    """The names the analysis knows: C's attributes, the per-step widths, verify function markers."""

    c_source_attrs: frozenset[str] = C_SOURCE_ATTRS
    per_step_attrs: frozenset[str] = PER_STEP_ATTRS
    verify_function_markers: tuple[str, ...] = VERIFY_FUNCTION_MARKERS
    extra_c_attrs: frozenset[str] = field(default_factory=frozenset)

    def is_verify_function(self, name: str) -> bool:
        return any(m in name for m in self.verify_function_markers)

    @cached_property  # asked of every file triage reads
    def prefilter_tokens(self) -> tuple[bytes, ...]:
        return tuple(n.encode() for n in sorted(self.c_source_attrs | self.extra_c_attrs))


DEFAULT_VOCABULARY = Vocabulary()
