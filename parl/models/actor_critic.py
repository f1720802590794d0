"""Actor-critic models for the policy-gradient family (PolicyGradient, A2C, PPO).

Every model here answers two calls, so algorithms never care whether it is
feedforward or recurrent:

    dist, value, next_states = model.step(inputs, states)        # one step per row (acting, bootstrap)
    dist, value = model.sequence(inputs, states, lengths)        # rows are time-ordered segments (learning)
    policy = model.compile_policy()                              # step for acting, over fast layer callables

``dist`` is a :class:`~parl.layers.distributions.Categorical` (discrete
actions, int64 ``[1]``) or a :class:`~parl.layers.distributions.DiagGaussian`
with mean and softplus sigma (continuous actions, float32 ``[action_dim]`` in
[-1, 1] after clipping by the agent); ``value`` is ``[B, 1]``.
A recurrent model declares its memory as state specs ``h`` and ``c``; in
:meth:`ActorCriticModel.sequence` it restarts each segment from the state stored
with the segment's first row and unrolls it step by step.

A model here writes its features once (``_features``, over a
:data:`~parl.layers.compiled.Bind`); :meth:`ActorCriticModel.step` runs them
over the layers and :meth:`ActorCriticModel.compile_policy` over their fast
callables.
"""

from __future__ import annotations

from typing import Callable, Dict, Literal, Mapping, Optional, Sequence, Tuple, Union, overload

import numpy as np
import paddle
import paddle.nn.functional as F

from parl import layers
from parl.core.model import Model
from parl.core.specs import SpecList
from parl.layers.compiled import Bind, chain, fast, plain, stands_in_for
from parl.layers.distributions import Categorical, DiagGaussian
from parl.models.conv_torso import MINATAR_CONVS, ConvSpec
from parl.models.encoders import InputEncoder, ObsInput, multi_input_encoder
from parl.validation import check_int

TensorDict = Dict[str, paddle.Tensor]
TensorMap = Mapping[str, paddle.Tensor]
Distribution = Union[Categorical, DiagGaussian]
#: ``(inputs, states) -> (policy, value, next states)``; the value is None where it is not computed (acting).
StepFn = Callable[[TensorMap, TensorMap], Tuple[Distribution, Optional[paddle.Tensor], TensorDict]]
#: A StepFn that computes the value (not acting).
ValuedStepFn = Callable[[TensorMap, TensorMap], Tuple[Distribution, paddle.Tensor, TensorDict]]
#: ``(inputs, states) -> (policy features, value features, next states)``; value features may be None.
FeaturesFn = Callable[[TensorMap, TensorMap], Tuple[paddle.Tensor, Optional[paddle.Tensor], TensorDict]]

#: Smallest standard deviation of a Gaussian head (keeps log-probabilities finite).
MIN_STD = 1e-3


class ActorCriticModel(Model):
    """Base of the actor-critic models: a policy head and a value head over one observation.

    Args:
        obs_dim: length of the float32 ``obs`` input; None for a subclass that declares an input of
            its own in :meth:`get_input_specs` (frames: :class:`~parl.models.pixel_actor_critic.AtariActorCritic`)
            or gives an ``encoder``.
        num_actions: discrete actions (give this or ``action_dim``).
        action_dim: dimensions of a continuous action.
        encoder: how the trunk reads the inputs (None: :class:`~parl.models.encoders.ObsInput` of
            ``obs_dim`` when given); it declares the input specs.
    """

    def __init__(
        self,
        obs_dim: Optional[int],
        num_actions: Optional[int],
        action_dim: Optional[int],
        encoder: Optional[InputEncoder] = None,
    ) -> None:
        super().__init__()
        if (num_actions is None) == (action_dim is None):
            raise ValueError(
                f"give exactly one of num_actions (discrete) and action_dim (continuous), "
                f"got num_actions={num_actions!r}, action_dim={action_dim!r}"
            )
        self.obs_dim = None if obs_dim is None else check_int("obs_dim", obs_dim, 1)
        if encoder is None and self.obs_dim is not None:
            encoder = ObsInput(self.obs_dim)
        self.encoder = encoder
        self.discrete = num_actions is not None
        if self.discrete:
            self.num_actions = check_int("num_actions", num_actions, 2)
            self.logits = layers.fc(self.num_actions)
        else:
            self.action_dim = check_int("action_dim", action_dim, 1)
            self.mean = layers.fc(self.action_dim)
            self.sigma = layers.fc(self.action_dim)
        self.critic = layers.fc(1)

    def get_input_specs(self) -> SpecList:
        if self.encoder is not None:
            return self.encoder.get_input_specs()
        return [("obs", dict(shape=[self.obs_dim], dtype="float32"))]

    def get_action_specs(self) -> SpecList:
        if self.discrete:
            return [("action", dict(shape=[1], dtype="int64", range=[0, self.num_actions]))]
        return [("action", dict(shape=[self.action_dim], dtype="float32"))]

    def step(self, inputs: TensorMap, states: TensorMap) -> Tuple[Distribution, paddle.Tensor, TensorDict]:
        """Policy, value and next states for one step of every row."""
        return self._step(plain, acting=False)(inputs, states)

    @stands_in_for(["step"])
    def compile_policy(self) -> Optional[StepFn]:
        """:meth:`step` for acting, over the layers' fast callables: the same policy and next states; the
        value is not computed (None), nor a Gaussian's standard deviation unless a sample needs it.

        None on a subclass that overrides ``step``.

        Raises:
            LayersNotBuilt: before the first call of :meth:`step`.
        """
        return self._step(fast, acting=True)

    def _features(self, bind: Bind, value: bool) -> FeaturesFn:
        """The features of the policy and (when ``value``) of the value head, and the next states."""
        raise NotImplementedError(f"{type(self).__name__} must implement step and sequence, or _features")

    @overload
    def _step(self, bind: Bind, acting: Literal[False]) -> ValuedStepFn: ...

    @overload
    def _step(self, bind: Bind, acting: bool) -> StepFn: ...

    def _step(self, bind: Bind, acting: bool) -> StepFn:
        features, policy = self._features(bind, not acting), self._policy(bind, acting)
        critic = None if acting else bind(self.critic)

        def step(inputs: TensorMap, states: TensorMap) -> Tuple[Distribution, Optional[paddle.Tensor], TensorDict]:
            policy_features, value_features, next_states = features(inputs, states)
            dist = policy(policy_features)
            return dist, (None if critic is None else critic(value_features)), next_states

        return step

    def _policy(self, bind: Bind, acting: bool) -> Callable[[paddle.Tensor], Distribution]:
        """Features -> the policy. ``acting``: a Gaussian computes its standard deviation when first read."""
        if self.discrete:
            logits = bind(self.logits)
            return lambda h: Categorical(logits(h))
        mean, sigma = bind(self.mean), bind(self.sigma)

        def std(h: paddle.Tensor) -> paddle.Tensor:
            return F.softplus(sigma(h)) + MIN_STD

        if acting:
            return lambda h: _ActingGaussian(mean(h), std, h)

        def gaussian(h: paddle.Tensor) -> DiagGaussian:
            sd = std(h)  # before the mean: the order the layers were first built in fixes a seed's weights
            return DiagGaussian(mean(h), sd)

        return gaussian

    def sequence(
        self, inputs: TensorMap, states: TensorMap, sequence_lengths: Sequence[int]
    ) -> Tuple[Distribution, paddle.Tensor]:
        """Policy and value of every row, rows being consecutive time-ordered segments.

        This evaluates each row on its own, which is all a feedforward model needs; a recurrent
        model overrides it to unroll each segment from the state stored with its first row.
        """
        dist, value, _ = self._step(plain, acting=False)(inputs, states)
        return dist, value


class MLPActorCritic(ActorCriticModel):
    """Feedforward actor and critic, each with its own ``hidden_sizes`` tanh layers (or one shared trunk).

    Args:
        shared: one trunk feeds both heads (fewer parameters; the losses then share gradients).
    """

    def __init__(
        self,
        obs_dim: int,
        num_actions: Optional[int] = None,
        action_dim: Optional[int] = None,
        hidden_sizes: Sequence[int] = (64, 64),
        shared: bool = False,
    ) -> None:
        super().__init__(obs_dim, num_actions, action_dim)
        self._trunks(hidden_sizes, shared)

    def _trunks(self, hidden_sizes: Sequence[int], shared: bool) -> None:
        self.shared = bool(shared)
        self.actor_hidden = [layers.fc(check_int("hidden_sizes", h, 1), act="tanh") for h in hidden_sizes]
        self.critic_hidden = [] if self.shared else [layers.fc(h, act="tanh") for h in hidden_sizes]

    def _features(self, bind: Bind, value: bool) -> FeaturesFn:
        actor = chain(bind, self.actor_hidden)
        encoder = self.encoder
        assert encoder is not None  # set from obs_dim, or given
        if self.shared:
            trunk = encoder.into(bind, actor)

            def shared(inputs: TensorMap, states: TensorMap) -> Tuple[paddle.Tensor, paddle.Tensor, TensorDict]:
                h = trunk(inputs)
                return h, h, {}

            return shared
        critic = chain(bind, self.critic_hidden) if value else None
        encode = encoder.features(bind)

        def separate(inputs: TensorMap, states: TensorMap) -> Tuple[paddle.Tensor, Optional[paddle.Tensor], TensorDict]:
            obs = encode(inputs)
            return actor(obs), (None if critic is None else critic(obs)), {}

        return separate


class MultiInputActorCritic(MLPActorCritic):
    """:class:`MLPActorCritic` over several inputs: a :class:`~parl.models.encoders.MultiInputEncoder`
    (a small CNN per image input, an MLP per other input, concatenated) shared by the actor's and the
    critic's tanh layers, as Stable-Baselines3's ``MultiInputPolicy`` for PPO and A2C.

    Args:
        observation_shapes, observation_dtypes: the inputs (from a Dict or Tuple observation space).
        num_actions, action_dim, hidden_sizes, shared: as :class:`MLPActorCritic`'s.
        convs, image_hidden_size, vector_hidden_sizes: the encoder's, as :class:`MultiInputEncoder`'s.
    """

    def __init__(
        self,
        observation_shapes: Mapping[str, Sequence[int]],
        num_actions: Optional[int] = None,
        action_dim: Optional[int] = None,
        observation_dtypes: Optional[Mapping[str, str]] = None,
        hidden_sizes: Sequence[int] = (64, 64),
        shared: bool = False,
        convs: Sequence[ConvSpec] = MINATAR_CONVS,
        image_hidden_size: int = 128,
        vector_hidden_sizes: Sequence[int] = (64,),
    ) -> None:
        encoder = multi_input_encoder(
            observation_shapes, observation_dtypes, convs, image_hidden_size, vector_hidden_sizes
        )
        ActorCriticModel.__init__(self, None, num_actions, action_dim, encoder)
        self._trunks(hidden_sizes, shared)


class LSTMActorCritic(ActorCriticModel):
    """An fc layer, an LSTM cell, then the policy and value heads; memory flows through state specs ``h``, ``c``."""

    def __init__(
        self,
        obs_dim: int,
        num_actions: Optional[int] = None,
        action_dim: Optional[int] = None,
        hidden_size: int = 64,
    ) -> None:
        super().__init__(obs_dim, num_actions, action_dim)
        self.hidden_size = check_int("hidden_size", hidden_size, 1)
        self.embed = layers.fc(self.hidden_size, act="tanh")
        self.cell = layers.lstm(self.hidden_size)

    def get_state_specs(self) -> SpecList:
        return [
            ("h", dict(shape=[self.hidden_size], dtype="float32")),
            ("c", dict(shape=[self.hidden_size], dtype="float32")),
        ]

    def _features(self, bind: Bind, value: bool) -> FeaturesFn:
        embed, cell = bind(self.embed), bind(self.cell)

        def features(inputs: TensorMap, states: TensorMap) -> Tuple[paddle.Tensor, paddle.Tensor, TensorDict]:
            out, (h, c) = cell(embed(inputs["obs"]), (states["h"], states["c"]))
            return out, out, {"h": h, "c": c}

        return features

    def sequence(
        self, inputs: TensorMap, states: TensorMap, sequence_lengths: Sequence[int]
    ) -> Tuple[Distribution, paddle.Tensor]:
        gather, starts, positions, longest = _segment_layout(sequence_lengths)
        x = self.embed(inputs["obs"])
        num = len(sequence_lengths)
        padded = paddle.gather(x, gather).reshape([num, longest, -1])  # [S, T, H]; short segments repeat rows
        h = paddle.gather(states["h"], starts)
        c = paddle.gather(states["c"], starts)
        outputs = []
        for t in range(longest):
            out, (h, c) = self.cell(padded[:, t], (h, c))
            outputs.append(out)
        flat = paddle.stack(outputs, axis=1).reshape([num * longest, -1])
        out = paddle.gather(flat, positions)  # back to row order
        return self._policy(plain, acting=False)(out), self.critic(out)


class _ActingGaussian(DiagGaussian):
    """``DiagGaussian(mean, std_of(features))`` whose standard deviation is computed when first read:
    a deterministic action (the mean) needs none. For acting only, where nothing is differentiated and
    the weights cannot change between the two reads (the task holds its weights lock)."""

    def __init__(
        self, mean: paddle.Tensor, std_of: Callable[[paddle.Tensor], paddle.Tensor], features: paddle.Tensor
    ) -> None:
        self.mean = mean
        self._std_of, self._features = std_of, features
        self._std: Optional[paddle.Tensor] = None

    @property
    def std(self) -> paddle.Tensor:  # type: ignore[override]
        """The standard deviation, computed on the first read."""
        if self._std is None:
            self._std = self._std_of(self._features)
        return self._std


def _segment_layout(sequence_lengths: Sequence[int]) -> Tuple[paddle.Tensor, paddle.Tensor, paddle.Tensor, int]:
    """Index tensors that pad rows into ``[segments, longest]`` and bring them back."""
    lengths = np.asarray(sequence_lengths, dtype=np.int64)
    longest = int(lengths.max())
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    offsets = np.minimum(np.arange(longest)[None, :], lengths[:, None] - 1)
    gather = (starts[:, None] + offsets).reshape(-1)
    positions = np.concatenate([s * longest + np.arange(n) for s, n in enumerate(lengths)])
    return (paddle.to_tensor(gather), paddle.to_tensor(starts), paddle.to_tensor(positions), longest)
