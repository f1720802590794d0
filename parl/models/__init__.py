"""parl.models: ready-made models for common observation and action spaces."""

from parl.models.actor_critic import ActorCriticModel, LSTMActorCritic, MLPActorCritic, MultiInputActorCritic
from parl.models.atari_q_model import AtariQModel, MinAtarQModel
from parl.models.central_critic import CentralCriticActorCritic
from parl.models.continuous import (
    DeterministicActorCritic,
    GaussianActorCritic,
    MultiInputDeterministicActorCritic,
    MultiInputGaussianActorCritic,
)
from parl.models.encoders import InputEncoder, MultiInputEncoder, ObsInput
from parl.models.masked_actor_critic import MaskedMLPActorCritic
from parl.models.masked_q_model import MaskedMLPQModel
from parl.models.mlp_q_model import MLPQModel, MultiInputQModel, QModel
from parl.models.pixel_actor_critic import AtariActorCritic

__all__ = [
    "ActorCriticModel",
    "AtariActorCritic",
    "AtariQModel",
    "CentralCriticActorCritic",
    "DeterministicActorCritic",
    "GaussianActorCritic",
    "InputEncoder",
    "LSTMActorCritic",
    "MLPActorCritic",
    "MLPQModel",
    "MaskedMLPActorCritic",
    "MaskedMLPQModel",
    "MinAtarQModel",
    "MultiInputActorCritic",
    "MultiInputDeterministicActorCritic",
    "MultiInputEncoder",
    "MultiInputGaussianActorCritic",
    "MultiInputQModel",
    "ObsInput",
    "QModel",
]
