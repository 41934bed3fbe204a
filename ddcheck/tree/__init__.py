"""The ground floor: what ddcheck knows of the target SGLang tree, on which every command stands.

``runtime``: the tree's own code, run from its files, with stand-ins found automatically for what
cannot run on this machine.
"""
