"""The ``parl`` command (:mod:`.commands`: ``main``) and ``parl serve`` in a child process
(:mod:`.serve_process`). The names of :mod:`.commands` are found here too, imported on first use."""

from parl.moved_names import forward_names

__getattr__ = forward_names(["parl.experiment.cli.commands"])
