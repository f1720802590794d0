"""A robot config read and checked (:mod:`.robot_config`: ``load_config``, ``RobotConfig``,
``ConfigError``), its class specs and YAML, its environment's spaces, and the robot built from it
(:mod:`.build`). The names of :mod:`.robot_config` are found here too, imported on first use."""

from parl.moved_names import forward_names

__getattr__ = forward_names(["parl.experiment.config.robot_config"])
