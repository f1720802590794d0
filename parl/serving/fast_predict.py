"""Fast acting passes for the library's own algorithm and model pairs.

    predictor = compile_predictor(algorithm)      # None: not a pair this module knows
    actions, next_states = predictor(inputs, states, deterministic)

A predictor returns what ``algorithm.predict`` returns, bit for bit (the test
suite compares the two), but does only the work the actions need and calls
the kernels directly:

- actor-critic models: the critic is not computed (``predict`` discards the
  value), and a deterministic Gaussian action computes no standard deviation;
- fully connected layers run as one ``_C_ops.linear`` call each (matmul and
  bias add in one call, the same values) without the per-layer Python of
  :class:`~parl.layers.fc.FC`;
- random draws use the same public calls as the plain path, so a seeded run
  draws the same actions whichever path acts.

A pair is known when the algorithm's ``predict`` and the model's methods it
reaches are the library's own (a subclass that overrides one of them acts
through the plain path). Layers other than plain FC layers are called as they
are. Predictors are made after the first plain prediction, when every layer
has its parameters.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import paddle
import paddle.nn.functional as F
from paddle import _C_ops

from parl.core.algorithm import Algorithm
from parl.layers.ensemble_fc import EnsembleFC
from parl.layers.fc import FC
from parl.layers.layer_func import LayerFunc, training_mode
from parl.layers.recurrent import GRU, LSTM

TensorDict = Dict[str, paddle.Tensor]
Predictor = Callable[[TensorDict, TensorDict, bool], Tuple[TensorDict, TensorDict]]
Chain = Callable[[paddle.Tensor], paddle.Tensor]

_matmul, _linear = _C_ops.matmul, _C_ops.linear

#: Layers that compute the same in training and evaluation mode.
_MODELESS = (FC, EnsembleFC, LSTM, GRU)


def compile_predictor(algorithm: Algorithm) -> Optional[Predictor]:
    """A fast predictor for ``algorithm``, or None when its algorithm and model pair is not one this module knows.

    Raises:
        LayersNotBuilt: a layer the predictor needs has no parameters yet (ask again after a plain prediction).
    """
    for make in _COMPILERS:
        predictor = make(algorithm)
        if predictor is not None:
            if all(type(layer) in _MODELESS for _, layer in algorithm.model.named_layers()):
                return predictor
            return _in_eval_mode(predictor)
    return None


def _in_eval_mode(predictor: Predictor) -> Predictor:
    """``predictor`` in evaluation mode, for models with a layer that may read it (batch_norm does)."""

    def in_eval_mode(inputs: TensorDict, states: TensorDict, deterministic: bool) -> Tuple[TensorDict, TensorDict]:
        with training_mode(False):
            return predictor(inputs, states, deterministic)

    return in_eval_mode


class LayersNotBuilt(Exception):
    """A layer a fast predictor needs has no parameters yet."""


def _chain(layers: Sequence[LayerFunc]) -> Chain:
    """``x -> layers[-1](...layers[0](x))``: FC layers as raw kernels, other layers called as they are."""
    steps: List[Tuple[Optional[paddle.Tensor], Optional[paddle.Tensor], Optional[Callable], Optional[LayerFunc]]] = []
    for layer in layers:
        if not layer.built:
            raise LayersNotBuilt
        if type(layer) is FC:
            steps.append((layer.params["w"], layer.params["b"] if layer.use_bias else None, layer._act, None))
        else:
            steps.append((None, None, None, layer))
    steps_t = tuple(steps)

    def chain(x: paddle.Tensor) -> paddle.Tensor:
        for w, b, act, layer in steps_t:
            if layer is not None:
                x = layer(x)
                continue
            # linear is matmul then add in one call: the same values (tests/test_fast_predict.py).
            x = _linear(x, w, b) if b is not None else _matmul(x, w, False, False)
            if act is not None:
                x = act(x)
        return x

    return chain


def _overrides(obj: object, base: type, *names: str) -> bool:
    """Whether ``type(obj)`` replaces any of ``base``'s methods ``names``."""
    cls = type(obj)
    return any(getattr(cls, name) is not getattr(base, name) for name in names)


# -- DQN over MLPQModel -----------------------------------------------------------------------


def _dqn_mlp(algorithm: Algorithm) -> Optional[Predictor]:
    from parl.algorithms.dqn import DQN
    from parl.models.mlp_q_model import MLPQModel

    model = algorithm.model
    if not isinstance(algorithm, DQN) or _overrides(algorithm, DQN, "predict"):
        return None
    if not isinstance(model, MLPQModel) or _overrides(model, MLPQModel, "value"):
        return None
    trunk = _chain(model.hidden)
    argmax = paddle.argmax
    if not model.dueling:
        head = _chain([model.q])

        def predict(inputs: TensorDict, states: TensorDict, deterministic: bool) -> Tuple[TensorDict, TensorDict]:
            return {"action": argmax(head(trunk(inputs["obs"])), axis=-1, keepdim=True)}, {}

        return predict
    advantage_head, value_head = _chain([model.advantage]), _chain([model.state_value])

    def predict_dueling(inputs: TensorDict, states: TensorDict, deterministic: bool) -> Tuple[TensorDict, TensorDict]:
        h = trunk(inputs["obs"])
        advantage = advantage_head(h)
        q = value_head(h) + advantage - advantage.mean(axis=-1, keepdim=True)  # as MLPQModel.value
        return {"action": argmax(q, axis=-1, keepdim=True)}, {}

    return predict_dueling


# -- PolicyGradient, A2C, PPO over MLPActorCritic and LSTMActorCritic -------------------------


def _actor_critic(algorithm: Algorithm) -> Optional[Predictor]:
    from parl.algorithms.actor_critic_base import ActorCriticBase
    from parl.models.actor_critic import MIN_STD, ActorCriticModel, LSTMActorCritic, MLPActorCritic

    model = algorithm.model
    if not isinstance(algorithm, ActorCriticBase) or _overrides(algorithm, ActorCriticBase, "predict"):
        return None
    if _overrides(model, ActorCriticModel, "_heads"):
        return None
    if isinstance(model, MLPActorCritic) and not _overrides(model, MLPActorCritic, "step", "_features"):
        trunk = _chain(model.actor_hidden)
        recurrent = None
    elif isinstance(model, LSTMActorCritic) and not _overrides(model, LSTMActorCritic, "step"):
        if not model.cell.built:
            raise LayersNotBuilt
        trunk, recurrent = _chain([model.embed]), model.cell
    else:
        return None

    if model.discrete:
        logits_head = _chain([model.logits])
        argmax, log_softmax, exp, multinomial = paddle.argmax, F.log_softmax, paddle.exp, paddle.multinomial

        def act(h: paddle.Tensor, deterministic: bool) -> paddle.Tensor:
            logits = logits_head(h)
            if deterministic:  # Categorical.mode
                return argmax(logits, axis=-1, keepdim=True)
            # Categorical(logits).sample(): the same kernels draw the same actions
            return multinomial(exp(log_softmax(logits, axis=-1)), num_samples=1)

    else:
        mean_head, sigma_head = _chain([model.mean]), _chain([model.sigma])
        softplus, randn = F.softplus, paddle.randn

        def act(h: paddle.Tensor, deterministic: bool) -> paddle.Tensor:
            mean = mean_head(h)
            if deterministic:  # DiagGaussian.mode: the mean; no standard deviation needed
                return mean
            std = softplus(sigma_head(h)) + MIN_STD
            return mean + std * randn(mean.shape, dtype=mean.dtype)  # DiagGaussian.sample

    if recurrent is None:

        def predict(inputs: TensorDict, states: TensorDict, deterministic: bool) -> Tuple[TensorDict, TensorDict]:
            return {"action": act(trunk(inputs["obs"]), deterministic)}, {}

        return predict

    def predict_recurrent(inputs: TensorDict, states: TensorDict, deterministic: bool) -> Tuple[TensorDict, TensorDict]:
        out, (h, c) = recurrent(trunk(inputs["obs"]), (states["h"], states["c"]))
        return {"action": act(out, deterministic)}, {"h": h, "c": c}

    return predict_recurrent


# -- DDPG, TD3 over DeterministicActorCritic; SAC over GaussianActorCritic --------------------


def _continuous(algorithm: Algorithm) -> Optional[Predictor]:
    from parl.algorithms.ddpg import DDPG
    from parl.algorithms.sac import SAC
    from parl.models.continuous import LOG_STD_MAX, LOG_STD_MIN, DeterministicActor, GaussianActor

    actor = getattr(algorithm.model, "actor", None)
    if isinstance(algorithm, DDPG) and not _overrides(algorithm, DDPG, "predict"):
        if not isinstance(actor, DeterministicActor) or _overrides(actor, DeterministicActor, "forward"):
            return None
        policy = _chain(list(actor.hidden) + [actor.out])

        def predict(inputs: TensorDict, states: TensorDict, deterministic: bool) -> Tuple[TensorDict, TensorDict]:
            return {"action": policy(inputs["obs"])}, {}

        return predict
    if isinstance(algorithm, SAC) and not _overrides(algorithm, SAC, "predict"):
        if not isinstance(actor, GaussianActor) or _overrides(actor, GaussianActor, "forward"):
            return None
        body = _chain(list(actor.hidden) + [actor.out])
        split, clip, tanh, exp, randn = _C_ops.split_with_num, _C_ops.clip, _C_ops.tanh, _C_ops.exp, paddle.randn

        def predict_sac(inputs: TensorDict, states: TensorDict, deterministic: bool) -> Tuple[TensorDict, TensorDict]:
            mean, log_std = split(body(inputs["obs"]), 2, 1)  # paddle.split(..., axis=-1) on [B, 2D]
            if deterministic:  # tanh(mean): the clipped log std is not needed
                return {"action": tanh(mean)}, {}
            log_std = clip(log_std, LOG_STD_MIN, LOG_STD_MAX)
            return {"action": tanh(mean + exp(log_std) * randn(mean.shape))}, {}

        return predict_sac
    return None


_COMPILERS = (_dqn_mlp, _actor_critic, _continuous)
