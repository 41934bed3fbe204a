"""DD232's code: max running requests left to the release's reset (its guard)."""

from ddcheck.rules import StartupGuard


class MaxRunningRequests(StartupGuard):
    guard = 'Max running requests is reset to 48'

    def applies(self, s, facts):
        return s.max_running_requests is None
