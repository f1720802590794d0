"""A training run: the Trainer (:mod:`.trainer`), its callbacks, checkpoints, metrics, progress bar,
log and stop signals, the run ``parl train`` makes (:mod:`.run`) and the example scripts' launcher
(:mod:`.launch`)."""
