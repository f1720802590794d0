"""parl: a reinforcement-learning framework on PaddlePaddle for building robots.

A robot is a set of :class:`Agent` objects (one per environment copy) whose
:class:`AgentHelper` objects send prediction and training requests to
:class:`ComputationTask` objects through batching :class:`ComputationWrapper`
threads. :class:`Manager` builds and runs the whole thing.
"""

import warnings as _warnings
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Sequence as _Sequence

from parl.threads import prepare_environment as _prepare_environment

_prepare_environment()
# paddle warns at import that ccache, used only to build C++ extensions, is missing.
_warnings.filterwarnings("ignore", message="No ccache found", category=UserWarning)

from parl.threads import default_num_threads as _default_num_threads  # noqa: E402
from parl.threads import set_num_threads  # noqa: E402

set_num_threads(_default_num_threads())

from parl import layers  # noqa: E402
from parl import moved_names as _moved_names  # noqa: E402  (old names still import)
from parl.core.agent import Agent  # noqa: E402
from parl.core.agent_helper import AgentHelper  # noqa: E402
from parl.core.algorithm import Algorithm, create_algorithm_func  # noqa: E402
from parl.core.batch import Transition  # noqa: E402
from parl.core.communicator import Communicator  # noqa: E402
from parl.core.errors import AgentError, RemoteError  # noqa: E402
from parl.core.model import Model  # noqa: E402
from parl.experience.helpers import ExpReplayHelper, OnPolicyHelper  # noqa: E402
from parl.experience.predict_only import PredictOnlyHelper  # noqa: E402
from parl.experience.prioritized_replay_buffer import PrioritizedReplayBuffer  # noqa: E402
from parl.experience.replay_buffer import ReplayBuffer  # noqa: E402
from parl.runtime.manager import Manager, TaskSettings  # noqa: E402
from parl.runtime.processes.options import ProcessesOptions  # noqa: E402 - the options only
from parl.runtime.ray.options import RayOptions  # noqa: E402 - the options only; Ray is imported on use
from parl.seeding import seed_everything  # noqa: E402

if _TYPE_CHECKING:
    from parl.experiment.policy.export import Policy


def load_policy(directory: str, python_path: _Sequence[str] = ()) -> "Policy":
    """A policy ``parl export`` wrote: ``policy.predict({"obs": obs_batch})`` gives its deterministic
    actions with no Manager, threads or environment. Its files are checked as checkpoints are, and
    its classes are imported from installed packages or ``python_path`` only, never from the working
    or the policy directory (see :func:`parl.experiment.policy.export.load_policy`)."""
    from parl.experiment.policy.export import load_policy as _load_policy  # keeps import parl free of safetensors

    return _load_policy(directory, python_path=python_path)


from parl.serving.computation_task import ComputationTask  # noqa: E402
from parl.serving.computation_wrapper import Batching, ComputationWrapper  # noqa: E402
from parl.serving.self_play import SelfPlay  # noqa: E402

__version__ = "0.2.0"


def __getattr__(name: str) -> object:
    """The deprecated names of ``parl`` (``parl.framework``; docs/api.md), each with a DeprecationWarning."""
    return _moved_names.moved_attribute(__name__, name)


__all__ = [
    "Agent",
    "AgentError",
    "AgentHelper",
    "Algorithm",
    "Batching",
    "Communicator",
    "ComputationTask",
    "ComputationWrapper",
    "ExpReplayHelper",
    "Manager",
    "Model",
    "OnPolicyHelper",
    "PredictOnlyHelper",
    "PrioritizedReplayBuffer",
    "ProcessesOptions",
    "RayOptions",
    "RemoteError",
    "ReplayBuffer",
    "SelfPlay",
    "TaskSettings",
    "Transition",
    "create_algorithm_func",
    "layers",
    "seed_everything",
    "load_policy",
    "set_num_threads",
]
