"""parl.experiment: robots run from YAML configs, in rooms of one job each.

- ``config``: a robot config read and checked (``load_config``, ``RobotConfig``), the settings types it
  embeds (callbacks, when evaluations start), and the robot built from it.
- ``train``: the Trainer, its checkpoints, metrics, logs and stop signals.
- ``evaluation``: greedy evaluation, evaluation agents, remote evaluation, videos.
- ``runs``: several runs of one config (seeds, sweeps on Ray Tune) and their figures and plots.
- ``policy``: a trained policy on its own (``parl export``, ``load_policy``).
- ``cli``: the ``parl`` command.

Nothing is imported here, so ``import parl`` stays free of yaml and the other tools these modules
use: import the module needed. Rooms import downward only, in the order config, evaluation,
train and policy, runs, cli, e.g. ``from parl.experiment.config import load_config``. The module
paths of parl 0.1 (``parl.experiment.trainer``, ...) still import, with a DeprecationWarning.
"""
