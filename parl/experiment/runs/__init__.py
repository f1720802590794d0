"""Several runs of one config: seeds (:mod:`.seed_runs`), sweeps on Ray Tune (:mod:`.sweep`,
:mod:`.tune`), their figures over seeds (:mod:`.aggregate`, :mod:`.statistics`) and learning curves
(:mod:`.plot`)."""
