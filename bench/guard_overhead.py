#!/usr/bin/env python3
"""What `ddcheck guard` costs per verify step, on the Triton path of a real release.

    python bench/guard_overhead.py TREE [--device cuda] [--batch-sizes 8 32 64] [--prefix 2048]
                                   [--budget 16] [--layers 32] [--steps 50]

TREE: an sglang tree (0.5.23's verify-path files, e.g. unpacked from its wheel). The
backend is loaded from TREE as `ddcheck smoke` loads it; one verify step is `init_forward_metadata`
plus `forward_extend` for each of --layers attention layers (no MLPs, no sampling: a real step is
longer, so the percentages printed are upper bounds). One check (what the guard does after a verify
step's metadata: read the batch to the host, compare the backend's contract fields) is timed on its
own; "every step" is its cost over a step's, "default" that cost spread over the guard's sampling
interval after the first steps.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tree")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 32, 64])
    ap.add_argument("--prefix", type=int, default=2048)
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--steps", type=int, default=50)
    args = ap.parse_args()
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    import torch

    from ddcheck.guard import layout_of
    from ddcheck.guard.hook import EVERY, FIRST, Guard
    from ddcheck.smoke import handed
    from ddcheck.smoke.api import default_shape
    from ddcheck.smoke.batch import make_batch
    from ddcheck.smoke.harness import Session
    from ddcheck.smoke.loader import LoadContext, Recording, SglangImporter
    from ddcheck.tree import names
    from ddcheck.tree.sources import open_target

    w = args.budget + 1
    shape = default_shape(args.device)
    shape.max_bs = max(args.batch_sizes)
    shape.max_context_len = args.prefix + w + 16
    shape.pool_size = max(args.batch_sizes) * (args.prefix + w) + 64
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    tree = open_target(args.tree)
    ctx = LoadContext(device=args.device, num_draft_tokens=w, num_steps=w - 1)
    print(f"{args.tree}: W = C = {w}, prefix {args.prefix}, {args.layers} layers, heads {shape.num_q_heads}/"
          f"{shape.num_kv_heads} x {shape.head_dim} {shape.dtype}, {torch.cuda.get_device_name(0) if sync is not None and args.device.startswith('cuda') else 'cpu'}")
    print(f"{'bs':>4} {'step ms':>9} {'check ms':>9} {'every step':>11} {'default':>9}")
    with SglangImporter(tree, ctx) as importer:
        session = Session(importer, shape, w, args.device)
        cls = session.backend_cls
        layer = handed.layer(shape, importer.trace)
        rows = []
        for bs in args.batch_sizes:
            batch = make_batch(w, [args.prefix] * bs, shape, args.device, seed=0)
            runner = handed.model_runner(batch, shape, args.device, importer.trace, importer.server_args(), tree)
            importer.start_up(getattr(runner, names.MODEL_CONFIG_ATTR))  # the process groups, as smoke sets them
            pool, req_pool = getattr(runner, names.TOKEN_TO_KV_POOL), getattr(runner, names.REQ_TO_TOKEN_POOL)
            # the guard's cost is measured, not a verdict: a verify input holding the width and the mask will do
            spec = Recording("spec_info", importer.trace, custom_mask=batch.custom_mask,
                             **{f: w for f in names.WIDTH_FIELDS})
            fb = handed.forward_batch(batch, session.mode, spec, pool, req_pool, importer.trace)

            def step(backend) -> float:
                sync()
                t0 = time.perf_counter()
                backend.init_forward_metadata(fb)
                for _ in range(args.layers):
                    backend.forward_extend(batch.q, batch.k, batch.v, layer, fb)
                sync()
                return time.perf_counter() - t0

            def timed(backend) -> float:
                for _ in range(3):
                    step(backend)  # warm-up: kernels compiled, caches filled
                return statistics.median(step(backend) for _ in range(args.steps))

            backend = cls(runner)
            plain = timed(backend)
            # One check as the guard makes it after init_forward_metadata: the batch read to the host,
            # the backend's contract fields compared. Timed on its own (a difference of two step
            # medians drowns in run-to-run noise at large batches).
            guard = Guard("raise", every=1)

            def check() -> float:
                sync()
                t0 = time.perf_counter()
                guard.judge(backend, "eager", backend, layout_of(backend, fb), graph=False)
                sync()
                return time.perf_counter() - t0

            for _ in range(3):
                check()
            cost = statistics.median(check() for _ in range(args.steps))
            assert guard.checked >= args.steps and not guard.counts, "the guard did not check, or found a violation"
            every = cost / plain * 100
            default = cost / EVERY / plain * 100
            rows.append((bs, plain, cost))
            print(f"{bs:>4} {plain * 1e3:>9.3f} {cost * 1e3:>9.3f} {every:>10.2f}% {default:>8.3f}%")
    print(f"default: the first {FIRST} verify steps of each backend path, then every {EVERY}th")
    return 0


if __name__ == "__main__":
    sys.exit(main())
