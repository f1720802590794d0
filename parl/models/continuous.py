"""Models for continuous control with Q critics: DDPG and TD3 (deterministic actor), SAC (Gaussian actor).

Both families take a float32 ``obs`` of ``[obs_dim]`` (the multi-input variants: several inputs, each
actor and critic reading them through its own :class:`~parl.models.encoders.MultiInputEncoder`) and act
with a float32 ``action`` of ``[action_dim]`` in [-1, 1] (agents scale it to the environment's bounds).
Each holds an ``actor`` and a ``critic``, which take the model's observation, ``obs =
model.observation(inputs)`` (the ``obs`` tensor, or the whole input dict of a multi-input model):

    action = model.actor.forward(obs)                      # DeterministicActor: tanh output, [B, D]
    mean, log_std = model.actor.forward(obs)               # GaussianActor: pre-squash Gaussian, [B, D] each
    dist = model.actor.dist(obs)                           # ... as a TanhGaussian
    forward = model.actor.compile_forward()                # forward over fast layer callables, for acting
    q = model.critic.value(obs, action)                    # QCritic: [members, B, 1], one row per critic
    q = model.critic.value(obs, action, frozen=True)       # same values; no gradient reaches the critic

``frozen=True`` is how actor losses go through the critic: the gradient
reaches the action (and so the actor) but not the critic's weights, so one
optimizer can minimize the sum of the actor and critic losses.

These models build their layers when they are made (the specs give every
input size), so an algorithm can copy them into target networks at once and
weight snapshots taken while training starts are always complete.
"""

from __future__ import annotations

import math
import operator
from typing import Callable, Mapping, Optional, Sequence, Tuple, Type, Union, cast

import paddle
from paddle import _C_ops

from parl import layers
from parl.core.model import Model
from parl.core.specs import SpecList
from parl.layers.compiled import Bind, chain, fast, plain, stands_in_for
from parl.layers.distributions import TanhGaussian
from parl.layers.ensemble_fc import EnsembleFC
from parl.layers.layer_func import LayerFunc, ParamSpec
from parl.models.conv_torso import MINATAR_CONVS, ConvSpec
from parl.models.encoders import FeaturesFn, MultiInputEncoder, multi_input_encoder
from parl.validation import check_int, check_positive

#: Bounds of a GaussianActor's log standard deviation (as Stable-Baselines3's SAC).
LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0

#: What the actor and the critic take: the ``obs`` tensor, or the input dict of a multi-input model.
Observation = Union[paddle.Tensor, Mapping[str, paddle.Tensor]]
#: ``obs -> action`` of a DeterministicActor.
ActionFn = Callable[[Observation], paddle.Tensor]
#: ``obs -> (mean, log_std)`` of a GaussianActor.
GaussianFn = Callable[[Observation], Tuple[paddle.Tensor, paddle.Tensor]]


def _hidden(sizes: Sequence[int]) -> list:
    return [layers.fc(check_int("hidden_sizes", h, 1), act="relu") for h in sizes]


class QCritic(Model):
    """``members`` independent Q networks over ``concat(obs, action)``, computed together.

    Each layer is an :class:`~parl.layers.ensemble_fc.EnsembleFC`, so the
    twin critics of TD3 and SAC cost one kernel per layer. With an ``encoder`` the observation is the
    input dict, and the members read the encoder's features.
    """

    def __init__(self, members: int, hidden_sizes: Sequence[int], encoder: Optional[MultiInputEncoder] = None) -> None:
        super().__init__()
        self.encoder = encoder
        self.members = check_int("num_critics", members, 1)
        self.hidden = [EnsembleFC(check_int("hidden_sizes", h, 1), self.members, act="relu") for h in hidden_sizes]
        self.out = EnsembleFC(1, self.members)

    def value(self, obs: Observation, action: paddle.Tensor, *, frozen: bool = False) -> paddle.Tensor:
        """``Q_m(obs, action)`` for every member ``m``: ``[members, B, 1]``.

        ``frozen=True`` detaches the weights: gradients flow to ``obs`` and
        ``action`` only (an encoder's features are then computed without gradient).
        """
        h = paddle.concat([self._features(obs, frozen), action], axis=-1)
        for layer in self.hidden + [self.out]:
            h = layer.frozen(h) if frozen else layer(h)
        return h

    def _features(self, obs: Observation, frozen: bool) -> paddle.Tensor:
        """``obs`` itself, or its encoder's features of the input dict (without gradient when ``frozen``)."""
        if self.encoder is None:
            return cast(paddle.Tensor, obs)
        inputs = cast(Mapping[str, paddle.Tensor], obs)
        if not frozen:
            return self.encoder.features(plain)(inputs)
        with paddle.no_grad():
            return self.encoder.features(plain)(inputs)


class DeterministicActor(Model):
    """``tanh(MLP(obs))``: one action in (-1, 1) per row (DDPG, TD3); with an ``encoder``, of its features
    of the input dict."""

    def __init__(
        self, action_dim: int, hidden_sizes: Sequence[int], encoder: Optional[MultiInputEncoder] = None
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.hidden = _hidden(hidden_sizes)
        self.out = layers.fc(check_int("action_dim", action_dim, 1), act="tanh")

    def forward(self, obs: Observation) -> paddle.Tensor:
        """The action, ``[B, action_dim]``."""
        return self._forward(plain)(obs)

    @stands_in_for(["forward"])
    def compile_forward(self) -> Optional[ActionFn]:
        """:meth:`forward` over the layers' fast callables (None on a subclass that overrides ``forward``)."""
        return self._forward(fast)

    def _forward(self, bind: Bind) -> ActionFn:
        return _encoded(self.encoder, bind, chain(bind, [*self.hidden, self.out]))


class GaussianActor(Model):
    """A diagonal Gaussian over pre-squash actions, squashed by tanh (SAC).

    One output layer gives the mean and the log standard deviation, the latter
    clipped to [:data:`LOG_STD_MIN`, :data:`LOG_STD_MAX`]. With an ``encoder``, of its features of the
    input dict.
    """

    def __init__(
        self, action_dim: int, hidden_sizes: Sequence[int], encoder: Optional[MultiInputEncoder] = None
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.action_dim = check_int("action_dim", action_dim, 1)
        self.hidden = _hidden(hidden_sizes)
        self.out = layers.fc(2 * self.action_dim)

    def forward(self, obs: Observation) -> Tuple[paddle.Tensor, paddle.Tensor]:
        """``(mean, log_std)``, each ``[B, action_dim]``."""
        return self._forward(plain)(obs)

    @stands_in_for(["forward"])
    def compile_forward(self) -> Optional[GaussianFn]:
        """:meth:`forward` over the layers' fast callables (None on a subclass that overrides ``forward``)."""
        return self._forward(fast)

    def _forward(self, bind: Bind) -> GaussianFn:
        body = _encoded(self.encoder, bind, chain(bind, [*self.hidden, self.out]))

        def forward(obs: Observation) -> Tuple[paddle.Tensor, paddle.Tensor]:
            out = body(obs)
            # paddle.split(out, 2, axis=-1) and paddle.clip run these kernels after a few us of Python.
            mean, log_std = _C_ops.split_with_num(out, 2, out.ndim - 1)
            return mean, _C_ops.clip(log_std, LOG_STD_MIN, LOG_STD_MAX)

        return forward

    def dist(self, obs: Observation) -> TanhGaussian:
        """The policy at ``obs``: samples and log-probabilities in action space (-1, 1)."""
        return TanhGaussian(*self.forward(obs))


class ContinuousActorCritic(Model):
    """Base of the models of this module: specs, an ``actor`` of the subclass's ``actor_class`` and the
    ``critic``.

    Args:
        obs_dim: length of the float32 ``obs`` input.
        action_dim: length of the float32 ``action``, in [-1, 1].
        num_critics: independent Q networks (1 for DDPG, 2 for TD3 and SAC).
        hidden_sizes: ReLU layers of the actor and of each critic.
    """

    #: :class:`DeterministicActor` or :class:`GaussianActor`, set by each subclass.
    actor_class: Type[Union[DeterministicActor, GaussianActor]]
    #: What the actor and critic take: ``obs`` or the whole input dict (None; a multi-input model).
    observation_key: Optional[str] = "obs"

    def __init__(
        self, obs_dim: int, action_dim: int, num_critics: int = 2, hidden_sizes: Sequence[int] = (256, 256)
    ) -> None:
        super().__init__()
        self.obs_dim = check_int("obs_dim", obs_dim, 1)
        self._parts(action_dim, num_critics, hidden_sizes, lambda: None)

    def _parts(
        self,
        action_dim: int,
        num_critics: int,
        hidden_sizes: Sequence[int],
        encoder: Callable[[], Optional[MultiInputEncoder]],
    ) -> None:
        """The actor and the critic (each with its own ``encoder()``), built at once."""
        self.action_dim = check_int("action_dim", action_dim, 1)
        self.hidden_sizes = tuple(check_int("hidden_sizes", h, 1) for h in hidden_sizes)
        self.critic = QCritic(num_critics, self.hidden_sizes, encoder())
        self.actor = self.actor_class(self.action_dim, self.hidden_sizes, encoder())
        with paddle.no_grad():
            obs, action = self.observation(self._zero_inputs()), paddle.zeros([1, self.action_dim])
            self.actor.forward(obs)
            self.critic.value(obs, action)

    def _zero_inputs(self) -> dict:
        return {"obs": paddle.zeros([1, self.obs_dim])}

    def observation(self, inputs: Mapping[str, paddle.Tensor]) -> Observation:
        """What the actor and critic take from the input dict: ``inputs["obs"]``, or the whole dict."""
        return self.observation_picker()(inputs)

    def observation_picker(self) -> Callable[[Mapping[str, paddle.Tensor]], Observation]:
        """:meth:`observation` as one function (made once by a predictor)."""
        key = self.observation_key
        return operator.itemgetter(key) if key is not None else _whole

    def get_input_specs(self) -> SpecList:
        return [("obs", dict(shape=[self.obs_dim], dtype="float32"))]

    def get_action_specs(self) -> SpecList:
        return [("action", dict(shape=[self.action_dim], dtype="float32"))]


class DeterministicActorCritic(ContinuousActorCritic):
    """A :class:`DeterministicActor` and ``num_critics`` Q networks (DDPG: 1, TD3: 2)."""

    actor_class = DeterministicActor
    actor: DeterministicActor


class GaussianActorCritic(ContinuousActorCritic):
    """A :class:`GaussianActor` and ``num_critics`` Q networks (SAC: 2)."""

    actor_class = GaussianActor
    actor: GaussianActor


class _MultiInput(ContinuousActorCritic):
    """What the multi-input variants share: the actor and the critic each read the input dict through
    a :class:`~parl.models.encoders.MultiInputEncoder` of their own (as Stable-Baselines3's off-policy
    ``MultiInputPolicy``)."""

    observation_key = None

    def __init__(
        self,
        observation_shapes: Mapping[str, Sequence[int]],
        action_dim: int,
        observation_dtypes: Optional[Mapping[str, str]] = None,
        num_critics: int = 2,
        hidden_sizes: Sequence[int] = (256, 256),
        convs: Sequence[ConvSpec] = MINATAR_CONVS,
        image_hidden_size: int = 128,
        vector_hidden_sizes: Sequence[int] = (64,),
    ) -> None:
        Model.__init__(self)

        def encoder() -> MultiInputEncoder:
            return multi_input_encoder(
                observation_shapes, observation_dtypes, convs, image_hidden_size, vector_hidden_sizes
            )

        self._parts(action_dim, num_critics, hidden_sizes, encoder)

    def _encoder(self) -> MultiInputEncoder:
        encoder = self.critic.encoder
        assert encoder is not None  # set in __init__
        return encoder

    def _zero_inputs(self) -> dict:
        return self._encoder().zero_inputs()

    def get_input_specs(self) -> SpecList:
        return self._encoder().get_input_specs()


class MultiInputDeterministicActorCritic(_MultiInput, DeterministicActorCritic):
    """:class:`DeterministicActorCritic` over several inputs (DDPG, TD3).

    Args:
        observation_shapes, observation_dtypes: the inputs (from a Dict or Tuple observation space).
        action_dim, num_critics, hidden_sizes: as :class:`ContinuousActorCritic`'s.
        convs, image_hidden_size, vector_hidden_sizes: each encoder's, as :class:`MultiInputEncoder`'s.
    """


class MultiInputGaussianActorCritic(_MultiInput, GaussianActorCritic):
    """:class:`GaussianActorCritic` over several inputs (SAC).

    Args:
        observation_shapes, observation_dtypes: the inputs (from a Dict or Tuple observation space).
        action_dim, num_critics, hidden_sizes: as :class:`ContinuousActorCritic`'s.
        convs, image_hidden_size, vector_hidden_sizes: each encoder's, as :class:`MultiInputEncoder`'s.
    """


def _whole(inputs: Mapping[str, paddle.Tensor]) -> Observation:
    return inputs


def _encoded(
    encoder: Optional[MultiInputEncoder], bind: Bind, body: Callable[[paddle.Tensor], paddle.Tensor]
) -> Callable[[Observation], paddle.Tensor]:
    """``body`` over the encoder's features of the input dict, or ``body`` itself without an encoder."""
    if encoder is None:
        return cast(Callable[[Observation], paddle.Tensor], body)
    features: FeaturesFn = encoder.features(bind)
    return lambda inputs: body(features(cast(Mapping[str, paddle.Tensor], inputs)))


class _Scalar(LayerFunc):
    """One trainable float, built at once (it reads no input)."""

    same_in_both_modes = True

    def __init__(self, initial: float) -> None:
        super().__init__("scalar")
        self.initial = float(initial)
        self._build_from_input(paddle.zeros([1]))

    def param_specs(self, first_input: paddle.Tensor) -> dict:
        return {"value": ParamSpec([], "float32", paddle.nn.initializer.Constant(self.initial))}

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.params["value"]


class Temperature(Model):
    """SAC's entropy temperature, learned as ``log_alpha`` (a Model so checkpoints and weight copies carry it)."""

    def __init__(self, initial_alpha: float = 1.0) -> None:
        super().__init__()
        self.log_alpha_value = _Scalar(math.log(check_positive("initial_alpha", initial_alpha)))

    def log_alpha(self) -> paddle.Tensor:
        """A 0-d tensor, trainable."""
        return self.log_alpha_value.params["value"]
