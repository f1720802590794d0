"""parl.experiment: robots run from YAML configs — config loading, building, training, metrics, checkpoints.

Nothing is imported here, so ``import parl`` stays free of yaml and the other
tools these modules use: import the module needed, e.g.
``from parl.experiment.config import load_config``.
"""
