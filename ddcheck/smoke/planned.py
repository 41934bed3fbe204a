"""What flashinfer's wrappers were planned with: they are stand-ins here (their kernels cannot run), and a
contract field read through ``...wrapper.planned`` is the arguments of the wrapper's last plan."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any


def planned_views(backend: Any, fields) -> None:
    """For a contract field read through ``...wrapper.planned``, give that wrapper the arguments of its
    last ``plan`` (or ``begin_forward``) call, by flashinfer's parameter names: what its kernels would
    have run on."""
    from ddcheck.contract.backends import PLAN_PARAMETERS
    from ddcheck.contract import read_field
    from ddcheck.tree.standins import is_stand_in, last_call

    for path in fields:
        head, sep, _ = path.partition(".planned.")
        if not sep:
            continue
        wrapper = read_field(backend, head)
        if not is_stand_in(wrapper):
            continue
        kind = type.__getattribute__(wrapper, "__dict__")["_ddcheck_name"].removesuffix("()").rsplit(".", 1)[-1]
        for method in ("plan", "begin_forward"):
            call = last_call(getattr(wrapper, method))
            if call is not None:
                args, kwargs = call
                planned = SimpleNamespace(**dict(zip(PLAN_PARAMETERS.get(kind, ()), args)), **kwargs)
                type.__setattr__(wrapper, "planned", planned)
                break
