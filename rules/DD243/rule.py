"""DD243's code: the launch names an algorithm the release does not know (argparse's choices, or its table)."""

from ddcheck.rules import LaunchRule


class UnknownAlgorithm(LaunchRule):
    stage = ("parse", "algorithm")

    def check(self, facts):
        e = facts.parse_error
        if e:
            if "--speculative-algorithm" in e and "invalid choice" in e and "unrecognized arguments" not in e \
                    and "ambiguous option" not in e:
                return [self.finding("refused", consequence="PARSE", release=facts.release, error=e)]
            return []
        return [self.finding("unknown", consequence="REJECT", release=facts.release, algorithm=facts.algorithm,
                             known=", ".join(facts.algorithms))] if facts.algorithm else []
