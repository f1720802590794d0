"""parl.models: ready-made models for common observation and action spaces."""

from parl.models.actor_critic import ActorCriticModel, LSTMActorCritic, MLPActorCritic
from parl.models.atari_q_model import AtariQModel
from parl.models.continuous import DeterministicActorCritic, GaussianActorCritic
from parl.models.mlp_q_model import MLPQModel

__all__ = [
    "ActorCriticModel",
    "AtariQModel",
    "DeterministicActorCritic",
    "GaussianActorCritic",
    "LSTMActorCritic",
    "MLPActorCritic",
    "MLPQModel",
]
