"""What a config rule's code is handed (:meth:`ddcheck.rules.LaunchRule.check`): the launch's facts, and the
analyses config offers over the tree as methods, so that rule code (``rules/DD2xx/rule.py``) asks them and
imports nothing above the rules' floor. The judgement (which case, which words) is the rule's; what the
tree's code says is here."""

from __future__ import annotations

import dataclasses
from collections import namedtuple
from functools import cached_property

from ddcheck.config import target as T
from ddcheck.config.evidence import scan_errors, scan_findings, verify_findings_by_backend
from ddcheck.config.inputs import input_value, mask_reads, resolver_gives_w
from ddcheck.config.paths import Launch, batch_fields, finding_reach, launch_value
from ddcheck.config.speculative import EAGLE_FAMILY, SpecSettings
from ddcheck.tree.evaluate import World
from ddcheck.tree.modules import TreeModules
from ddcheck.tree.sources import SourceTree

# general-purpose MHA backends: the alternatives a finding names
ALTERNATIVES = ("flashinfer", "fa3", "triton", "flex_attention", "torch_native")

# The reads of C on the launch's verify path (DD200/DD209): those reached on it, those behind a test
# ddcheck cannot decide for this launch ((finding, test) pairs), and the values the backend's start-up
# width holds for it where evaluated.
WidthReads = namedtuple("WidthReads", "found undecided fixed_at")


@dataclasses.dataclass
class LaunchFacts:
    """One launch (one verify site of it, for ``site`` rules) as the rules see it."""

    tree: SourceTree
    settings: SpecSettings | None = None
    release: str = ""  # "SGLang 0.5.10"
    run: object = None  # the TreeRun of the tree's start-up code (ddcheck.config.treerun)
    explicit: dict = dataclasses.field(default_factory=dict)  # server_args the launch set itself
    parse_error: str = ""  # what the release's argparse said of the command line
    closest: str = ""  # the flags it meant, as "--x: did you mean --y?" (an unknown or ambiguous flag)
    algorithm: str = ""  # the algorithm the launch names where the release does not know it
    algorithms: tuple[str, ...] = ()  # the release's algorithms (where the launch names another)
    smoke: object = None  # config --smoke: the run (ddcheck.config.smoke.SmokeRun)

    EAGLE_FAMILY = EAGLE_FAMILY
    ALTERNATIVES = ALTERNATIVES

    def at(self, settings: SpecSettings) -> "LaunchFacts":
        """The same launch at another of its verify sites."""
        return dataclasses.replace(self, settings=settings)

    # ------------------------------------------------------------------ the tree's code, read

    def guard(self, pattern: str, algo: str | None = None):
        """The release's start-up guard matching ``pattern`` for the algorithm (its ``evidence``), or None;
        DDTREE is handled by the DFLASH hooks in the PRs."""
        algo = algo or self.settings.algorithm
        g = T.guard_for(self.tree, pattern, algo)
        if g is None and algo == "DDTREE":
            g = T.guard_for(self.tree, pattern, "DFLASH")
        return g

    @staticmethod
    def allow_list(guard) -> list[str] | None:
        return T.allow_list(guard)

    def backend_files(self) -> dict[str, tuple[str, ...]]:
        return T.backend_files(self.tree)

    def verify_findings(self, backends: list[str]) -> dict:
        """The scan's error findings on each backend's verify path."""
        return verify_findings_by_backend(self.tree, backends)

    def engine(self, backend: str) -> str:
        """The scan engine that judged ``backend``'s files."""
        return scan_errors(self.tree, list(T.backend_files(self.tree)[backend]))[1]

    def mask_honoured(self, backend: str):
        return T.mask_honoured(self.tree, backend)

    def mask_reads(self, backend: str):
        """(whether the backend reads the custom mask on a path these settings take, why)."""
        return mask_reads(self.tree, list(T.backend_files(self.tree)[backend]), self.settings.values)

    def topk1_only(self, backend: str):
        return T.topk1_only(self.tree, backend)

    def text_marker(self, pattern: str, word: str):
        """The first line matching ``pattern`` in the tree's files whose relpath holds ``word``."""
        return T.text_marker(self.tree, pattern, [f.relpath for f in self.tree.files if word in f.relpath])

    def verify_capture(self, source: str):
        return T.verify_capture(self.tree, source)

    def mla_topk_guard(self):
        """(draft backend, its topk-1 guard lines, whether every module of the backend is an MLA one) where
        the launch drafts a tree (topk > 1) on a backend whose (MLA) module refuses topk > 1; else None."""
        s = self.settings
        if (s.eagle_topk or 1) <= 1 or s.algorithm not in EAGLE_FAMILY:
            return None
        backend = s.draft_attention_backend or s.decode_attention_backend or s.attention_backend
        if not backend:
            return None
        ev = T.topk1_only(self.tree, backend)
        if not ev:
            return None
        files = T.backend_files(self.tree).get(backend, ())
        return backend, ev, all("mla" in p.rsplit("/", 1)[-1] for p in files)

    @cached_property
    def width_reads(self) -> WidthReads:
        """The reads of C on this launch's verify path through its backend (the scan's findings, decided
        for its verify input and its paths)."""
        s, tree = self.settings, self.tree
        W = s.verify_width
        found = list(verify_findings_by_backend(tree, [s.verify_backend]).get(s.verify_backend) or [])
        fixed_at: set = set()
        undecided = []
        if s.verify_input:
            # Width resolvers (DD003): decided for the verify input this launch's worker builds.
            resolvers = [f for f in scan_findings(tree, list(T.backend_files(tree)[s.verify_backend])) if f.resolver]
            found = [f for f in found if not f.resolver]  # a resolver the scan calls DD001: decided here alike
            for f in resolvers:
                gives_w, test = resolver_gives_w(tree, f, input_value(s.verify_input, s.verify_input_fields,
                                                                      s.verify_input_type, s.verify_input_kinds))
                if gives_w is False:
                    found.append(dataclasses.replace(f, message=f"{f.function} returns C for {s.verify_input}: "
                                                                f"`{test}` does not hold for it"))
                elif gives_w is None:
                    undecided.append((f, test))
        if s.values:
            # Only what this launch's path reaches (entry points, graphs on or off, its settings' branches).
            launch = Launch(values=s.values, algorithm=s.algorithm, input_cls=s.verify_input,
                            input_fields=set(s.verify_input_fields), graphs=s.cuda_graph,
                            input_type=s.verify_input_type, input_kinds=frozenset(s.verify_input_kinds),
                            world=World(TreeModules.of(tree), s.algorithm),
                            modes=TreeModules.of(tree).mode_table(), batch_fields=batch_fields(tree))
            memo: dict = {}
            value = {id(f): launch_value(tree, f, launch, memo) for f in found}
            fixed_at = set(value.values())
            if not s.verify_width_per_step:
                # the backend's start-up width may itself be W for this launch (sized for the tree drafter)
                found = [f for f in found if value[id(f)] != W]
            if s.verify_width_per_step and s.cuda_graph and s.replay_gate_at and s.capture_width is not None:
                # Graph paths replay only batches as wide as the capture (can_run): a graph-only use of a
                # start-up width equal to the captured one is right for every batch that reaches it.
                eager = dataclasses.replace(launch, graphs=False)
                eager_memo: dict = {}
                found = [f for f in found if not (value[id(f)] == s.capture_width
                                                  and finding_reach(tree, f, eager, eager_memo).status == "never")]
            reaches = [(f, finding_reach(tree, f, launch, memo)) for f in found]
            found = [f for f, r in reaches if r.status == "reached"]
            undecided += [(f, r.why) for f, r in reaches if r.status == "conditional"]
        return WidthReads(found, undecided, fixed_at)

    def per_step_backends(self, but: str | None = None) -> list[str]:
        """The general-purpose backends (but ``but``) whose verify path has no width fixed at start-up (and,
        for a tree verify, that read the tree mask)."""
        files = T.backend_files(self.tree)
        cands = [b for b in ALTERNATIVES if b != but and b in files]
        return [b for b, fs in verify_findings_by_backend(self.tree, cands).items()
                if not fs and (not self.settings.tree_verify or T.mask_honoured(self.tree, b)[0])]
