#!/usr/bin/env python3
"""DD002's recall and false errors on the shapes of issue 51, against labels of our own.

Each label is a place in a release or a DDTree fork where C reaches a buffer's size one step further than
`zeros(max_bs * C)` (a helper of another module handed C, `C or 0`, `1 if C is None else C`, a helper's
tuple, a buffer handed out through an accessor) and the verify step writes W tokens per request into it;
each was read in the tree (the reading is in the comment). Prints, per target: recall (labels found as
DD002), false errors (error findings at a label: a capacity is never a layout error) and the DD002
findings of C handed to a helper that carry no label (to read and label, or to fix).
Usage: python bench/capacity_labels.py [--forks DIR]   (wheels from the ddcheck cache; forks unpacked here)
"""

from __future__ import annotations

import argparse
import sys
import tarfile
import tempfile
from pathlib import Path

from ddcheck.scan.api import scan
from ddcheck.scan.settings import Settings
from ddcheck.tree.sources import download_wheel

ATT = "sglang/srt/layers/attention/"
# target -> {(relpath, line) of the C reported}; forks by archive name
LABELS: dict[str, set[tuple[str, int]]] = {
    # aiter_backend.py:1179-1190 `max_seqlen_qo = 1 if C is None else C` -> make_mla_decode_meta_data_buffer;
    # planned into on the verify capture path (1354, 1383-1391)
    "0.5.10": {(ATT + "aiter_backend.py", 1190)},
    # aiter: `draft_slack = C or 0` into cuda_graph_kv_indices (1419-1427, written by the kv-index kernel on
    # verify replay, 1688); max_seqlen_qo as in 0.5.10 (1455-1465, 1702)
    "0.5.16": {(ATT + "aiter_backend.py", 1423), (ATT + "aiter_backend.py", 1465)},
    "0.5.23": {
        # maybe_create_verify_mask(num_draft_tokens=C) (verify_mask.py:57-81: C * (ctx + C) per request),
        # handed out by the `verify_mask` property; build_eagle_verify_input packs the mask into it
        # (eagle_worker_common.py:409-443)
        (ATT + "flashattention_backend.py", 2580), (ATT + "flashmla_backend.py", 319),
        (ATT + "trtllm_mla_backend.py", 530), (ATT + "deepseek_v4_backend.py", 3354),
        (ATT + "deepseek_v4_backend_hip_radix.py", 2475), (ATT + "qwen_sparse_attn_backend.py", 845),
        # the same helper; triton's own verify replay writes spec_info.custom_mask into it (634-638)
        (ATT + "triton_backend.py", 1242),
        # aiter: draft slack `C or 0` (2823-2830; kernel at 3164-3173), max_seqlen_qo (2858-2876; 3226-3236)
        (ATT + "aiter_backend.py", 2827), (ATT + "aiter_backend.py", 2876),
        # make_persistent_multi_ctas_kv_counter_buffer(max_batch_size=(R + 1) * max(1, C or 1)) (395-401),
        # handed to the decode kernel that runs bs * L single-token rows in ENCODER_ONLY verify (1820-1846)
        (ATT + "trtllm_mha_backend.py", 400),
    },
    # the forks' aiter backends carry 0.5.16's two shapes
    "DB-Guo-sglang-ddtree-dev-514ea1f3.tar.gz": {(ATT + "aiter_backend.py", 1480), (ATT + "aiter_backend.py", 1522)},
    "HaiyuZhou-sglang-ad7ab160.tar.gz": {(ATT + "aiter_backend.py", 1496)},
    "Rancy-Wang-sglang-433c58ed.tar.gz": {(ATT + "aiter_backend.py", 1423), (ATT + "aiter_backend.py", 1465)},
}


def target_path(name: str, forks: Path, scratch: Path) -> str:
    if not name.endswith(".tar.gz"):
        return str(download_wheel(name))
    out = scratch / name[: -len(".tar.gz")]
    with tarfile.open(forks / name) as tf:
        tf.extractall(out, filter=lambda m, path: None if m.issym() or m.islnk() else tarfile.data_filter(m, path))
    return str(next(out.rglob("sglang/__init__.py")).parent)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--forks", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "corpus" / "ddtree-forks")
    args = ap.parse_args()
    bad = 0
    with tempfile.TemporaryDirectory() as scratch:
        for name, labels in LABELS.items():
            if name.endswith(".tar.gz") and not (args.forks / name).is_file():
                print(f"{name}: no such archive under {args.forks}")
                continue
            r = scan([target_path(name, args.forks, Path(scratch))], settings=Settings(), use_cache=False)
            at = {}
            for f in r.findings:
                at.setdefault((f.relpath, f.line), []).append(f)
            found = {k for k in labels if any(f.rule == "DD002" for f in at.get(k, ()))}
            false_errors = [k for k in labels if any(f.severity.value == "error" for f in at.get(k, ()))]
            # C handed to a helper that sizes a buffer: the shape most of these labels have
            unlabelled = sorted({(f.relpath, f.line) for f in r.findings if f.rule == "DD002"
                                 and "is passed as `" in f.message} - labels)
            print(f"{name}: recall {len(found)}/{len(labels)}, false errors {len(false_errors)}")
            for k in sorted(labels - found):
                print(f"  missed {k[0]}:{k[1]}")
            for k in false_errors:
                print(f"  error at {k[0]}:{k[1]}")
            for k in unlabelled:
                print(f"  unlabelled (read it) {k[0]}:{k[1]}")
            bad += len(labels - found) + len(false_errors)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
