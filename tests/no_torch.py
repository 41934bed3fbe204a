"""Run ddcheck as in an environment where torch is not installed: every finder is told to find no
``torch`` (nor ``triton``), so ``import torch`` fails exactly as it does in a venv without it, and
``importlib.util.find_spec("torch")`` is None, here and in config's child process. ``python tests/no_torch.py
config ...``."""

import sys

HIDDEN = {"torch", "triton"}


class _Hide:
    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            return None
        find = getattr(self.finder, "find_spec", None)
        return find(name, path, target) if find else None

    def __getattr__(self, attr):
        return getattr(self.finder, attr)


sys.meta_path[:] = [_Hide(f) for f in sys.meta_path]

if __name__ == "__main__":
    from ddcheck.config import child

    if sys.argv[1:2] == ["--config-child"]:  # config's child process, torch hidden there too
        sys.argv = [sys.argv[0], *sys.argv[2:]]
        sys.exit(child.main())
    child.CHILD = [__file__, "--config-child"]
    from ddcheck.entry import main

    sys.argv = ["ddcheck", *sys.argv[1:]]
    main()
