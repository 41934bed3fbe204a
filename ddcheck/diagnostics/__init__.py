"""The one road of every finding: suppressions, baselines and the output formats."""
