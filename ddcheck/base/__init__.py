"""The ground floor: the finding model, exit codes, room to recurse, and ddcheck's version."""

__version__ = "0.1.0"
