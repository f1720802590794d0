"""parl.models: ready-made models for common observation and action spaces."""

from parl.models.actor_critic import ActorCriticModel, LSTMActorCritic, MLPActorCritic
from parl.models.atari_q_model import AtariQModel, MinAtarQModel
from parl.models.central_critic import CentralCriticActorCritic
from parl.models.continuous import DeterministicActorCritic, GaussianActorCritic
from parl.models.mlp_q_model import MLPQModel
from parl.models.pixel_actor_critic import AtariActorCritic

__all__ = [
    "ActorCriticModel",
    "AtariActorCritic",
    "AtariQModel",
    "CentralCriticActorCritic",
    "DeterministicActorCritic",
    "GaussianActorCritic",
    "LSTMActorCritic",
    "MLPActorCritic",
    "MLPQModel",
    "MinAtarQModel",
]
