"""Placement ``"rlx"``: an RLX server whose agents play environments that connect over the network
(:mod:`parl.runtime.rlx.runner`; the protocol is :mod:`parl.rlx`, docs/rlx.md)."""
