"""Placement ``"threads"``: one OS thread per agent (:mod:`.runner`), the default placement."""

from parl.runtime.threads.runner import ThreadRunner

__all__ = ["ThreadRunner"]
