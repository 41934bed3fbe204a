"""DD241's code: the release's argparse refuses the command line."""

from ddcheck.rules import LaunchRule


def unknown_algorithm(e: str) -> bool:
    return "--speculative-algorithm" in e and "invalid choice" in e


class ParseAmbiguousFlag(LaunchRule):
    stage = ("parse",)

    def check(self, facts):
        e = facts.parse_error
        if not ("ambiguous option" in e and "unrecognized arguments" not in e):
            return []
        meant = f" ({facts.closest})" if facts.closest else ""
        return [self.finding("refused", release=facts.release, error=e, meant=meant,
                             use=("use the flag you meant (the closest of its own flags, above); else "
                                  if facts.closest else ""))]
