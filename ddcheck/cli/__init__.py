"""The command line: the typer app (:mod:`.app`), the bodies it calls that every command shares
(:mod:`.scan` holds the console and the usage/internal failures), and config's body (:mod:`.config`).
Imports nothing: a plain scan through :mod:`ddcheck.entry` loads no CLI framework."""
