"""Ray as an engine: importing it, joining a cluster or starting a local one on 127.0.0.1, and the
actors' first steps; shared by placement ``"ray"`` (:mod:`parl.runtime.ray`) and ``parl tune``.
Nothing here imports ``ray`` until it is asked to."""
