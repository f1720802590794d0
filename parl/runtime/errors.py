"""Errors a placement raises that the layers above handle without knowing the placement."""

from __future__ import annotations


class PlacementStartError(Exception):
    """A placement could not start where its agents run (a cluster that cannot be joined, an address that
    cannot be listened on, a worker that failed in its constructor); the message is one line naming
    what and why.

    Attributes:
        usage: the user's setting is at fault (an address in use), not the run: ``parl`` exits with
            its usage status then.
    """

    usage = False
