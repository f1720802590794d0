"""parl.models: ready-made models for common observation and action spaces."""

from parl.models.actor_critic import ActorCriticModel, LSTMActorCritic, MLPActorCritic
from parl.models.atari_q_model import AtariQModel, MinAtarQModel
from parl.models.continuous import DeterministicActorCritic, GaussianActorCritic
from parl.models.masked_actor_critic import MaskedMLPActorCritic
from parl.models.mlp_q_model import MLPQModel
from parl.models.pixel_actor_critic import AtariActorCritic

__all__ = [
    "ActorCriticModel",
    "AtariActorCritic",
    "AtariQModel",
    "DeterministicActorCritic",
    "GaussianActorCritic",
    "LSTMActorCritic",
    "MLPActorCritic",
    "MLPQModel",
    "MaskedMLPActorCritic",
    "MinAtarQModel",
]
