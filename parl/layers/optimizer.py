"""A lean Adam for the small networks RL uses.

``paddle.optimizer.Adam.step`` spends about 300 us of Python bookkeeping per
call on a six-parameter MLP, half the cost of a whole training step there
(measured on a 2-core CPU machine). This class keeps its state in plain
tensors and calls the same fused kernel once per parameter, giving identical
updates (checked against ``paddle.optimizer.Adam`` in the tests) for about a
sixth of the overhead.

With clipping, the global gradient norm of each step is kept for metrics
(:attr:`Adam.last_grad_norm`); :func:`global_grad_norm` and
:func:`grad_norm_value` compute it for any list of gradients, and
:func:`grads_finite` tells whether a step's gradients are safe to apply.

A state restored by ``set_state_dict`` (from a checkpoint) is checked first
(``check_state_dict``): every entry of its parameter's shape, finite, and
plausible (no negative second moment or learning rate, a bias-correction power
``beta ** steps`` in [0, beta]), so a damaged one is refused before the first
step rather than turning the weights into NaN.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

import numpy as np
import paddle
from paddle import _C_ops

from parl.validation import check_positive, check_range


class OptimizerStateError(ValueError):
    """An optimizer state entry the optimizer cannot step from.

    Attributes:
        key: the entry (``<parameter name>_<slot>``, or ``learning_rate``).
        problem: what is wrong with it, in a few words (the message is ``"entry <key> <problem>"``).
    """

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"optimizer state entry {key!r} {problem}")
        self.key = key
        self.problem = problem


class Optimizer(Protocol):
    """What :class:`~parl.ComputationTask` needs of an optimizer (paddle's optimizers fit too)."""

    def step(self) -> None: ...

    def clear_grad(self, set_to_zero: bool = False) -> None: ...

    def state_dict(self) -> Mapping[str, object]: ...

    def set_state_dict(self, state: Dict[str, Any]) -> None: ...


def global_grad_norm(grads: Sequence[Optional[paddle.Tensor]]) -> Optional[paddle.Tensor]:
    """The L2 norm of all ``grads`` taken as one vector (a one-element tensor); None when every entry is None."""
    present = [g for g in grads if g is not None]
    return _l2_norm(present) if present else None


def _l2_norm(present: Sequence[paddle.Tensor]) -> paddle.Tensor:
    return paddle.sqrt(paddle.add_n([_C_ops.squared_l2_norm(g) for g in present]))


def grad_norm_value(grads: Sequence[Optional[paddle.Tensor]]) -> Optional[float]:
    """:func:`global_grad_norm` as a float, computed the cheaper way for where the gradients live:
    in numpy for CPU tensors (a few times faster than one paddle op per gradient on small
    networks), by paddle's reductions and one copy otherwise."""
    present = [g for g in grads if g is not None]
    if not present:
        return None
    if present[0].place.is_cpu_place():
        return math.sqrt(sum(float(np.vdot(array, array)) for array in (g.numpy() for g in present)))
    return float(_l2_norm(present).numpy().reshape(-1)[0])


def grads_finite(grads: Sequence[Optional[paddle.Tensor]]) -> bool:
    """Whether no gradient holds a NaN or an infinity (None entries hold nothing): in numpy for CPU
    tensors, by paddle's reductions and one copy otherwise."""
    present = [g for g in grads if g is not None]
    if not present:
        return True
    if present[0].place.is_cpu_place():
        return all(bool(np.isfinite(g.numpy()).all()) for g in present)
    return bool(paddle.stack([paddle.isfinite(g).all() for g in present]).all().numpy())


class Adam:
    """Adam (Kingma & Ba, 2015) with optional global gradient-norm clipping.

    Exposes the subset of the paddle optimizer interface that
    :class:`~parl.ComputationTask` uses: ``step``, ``clear_grad``,
    ``state_dict``, ``set_state_dict``, ``get_lr`` and ``set_lr``, plus
    :attr:`last_grad_norm` for metrics.
    """

    def __init__(
        self,
        parameters: List[paddle.Tensor],
        *,
        learning_rate: float = 1e-3,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        grad_clip: Optional[float] = None,
    ) -> None:
        self._params = list(parameters)
        if not self._params:
            raise ValueError("Adam needs at least one parameter, got none")
        self.beta1 = check_range("beta1", beta1, 0.0, 1.0)
        self.beta2 = check_range("beta2", beta2, 0.0, 1.0)
        self.epsilon = check_positive("epsilon", epsilon)
        self.grad_clip = None if grad_clip is None else check_positive("grad_clip", grad_clip)
        self._lr_value = check_positive("learning_rate", learning_rate)  # read by metrics without touching the tensor
        self._lr = paddle.to_tensor(np.array([self._lr_value], dtype=np.float32))
        self._last_grad_norm: Optional[paddle.Tensor] = None
        self._state = [self._fresh_state(p) for p in self._params]

    def _fresh_state(self, param: paddle.Tensor) -> Dict[str, paddle.Tensor]:
        return {
            "moment1": paddle.zeros_like(param),
            "moment2": paddle.zeros_like(param),
            "beta1_pow": paddle.to_tensor(np.array([self.beta1], dtype=np.float32)),
            "beta2_pow": paddle.to_tensor(np.array([self.beta2], dtype=np.float32)),
        }

    def _slot_bounds(self) -> Dict[str, Tuple[float, float]]:
        """The values each slot can hold: a second moment is a mean of squares, ``beta_pow`` is
        ``beta ** (steps + 1)``; (in float32, as the state is kept)."""
        return {
            "moment1": (-math.inf, math.inf),
            "moment2": (0.0, math.inf),
            "beta1_pow": (0.0, float(np.float32(self.beta1))),
            "beta2_pow": (0.0, float(np.float32(self.beta2))),
        }

    def get_lr(self) -> float:
        """The current learning rate."""
        return self._lr_value

    def set_lr(self, learning_rate: float) -> None:
        """Change the learning rate (for schedules; 0, the end of a linear schedule, leaves the parameters)."""
        self._lr_value = check_range("learning_rate", learning_rate, 0.0, float("inf"))
        self._lr.set_value(np.array([self._lr_value], dtype=np.float32))

    @property
    def last_grad_norm(self) -> Optional[float]:
        """Global L2 norm of the last step's gradients before clipping; None without clipping
        (the norm is then not computed) or before the first step."""
        norm = self._last_grad_norm
        return None if norm is None else float(norm.numpy().reshape(-1)[0])

    def step(self) -> None:
        """Apply one update from the parameters' gradients (parameters without a gradient are left alone)."""
        with paddle.no_grad():
            grads = [p.grad for p in self._params]
            if self.grad_clip is not None:
                grads = self._clipped(grads, self.grad_clip)
            for param, grad, st in zip(self._params, grads, self._state):
                if grad is not None:
                    self._update(param, grad, st)

    def _update(self, param: paddle.Tensor, grad: paddle.Tensor, st: Dict[str, paddle.Tensor]) -> None:
        """One parameter's update in place, from its (clipped) gradient and its state."""
        _C_ops.adam_(
            param,
            grad,
            self._lr,
            st["moment1"],
            st["moment2"],
            None,  # type: ignore[arg-type]  # paddle's stub omits Optional: no moment2_max (amsgrad off)
            st["beta1_pow"],
            st["beta2_pow"],
            None,  # type: ignore[arg-type]  # no master weight (paddle's stub omits Optional)
            None,  # type: ignore[arg-type]  # no skip-update flag (paddle's stub omits Optional)
            self.beta1,
            self.beta2,
            self.epsilon,
            False,
            1000,
            False,
            False,
            False,
        )

    def _clipped(self, grads: List[Optional[paddle.Tensor]], bound: float) -> List[Optional[paddle.Tensor]]:
        norm = global_grad_norm(grads)
        if norm is None:
            return grads
        self._last_grad_norm = norm
        scale = paddle.clip(bound / (norm + 1e-6), max=1.0)
        if norm.place.is_cpu_place():
            # paddle's CPU multiply by a one-element tensor takes a slow broadcasting path (about 20x
            # a scale by a Python float on a 3136x512 gradient); reading the factor costs no sync here.
            factor = float(scale.numpy().reshape(-1)[0])
            return [None if g is None else paddle.scale(g, factor) for g in grads]
        return [None if g is None else g * scale for g in grads]

    def clear_grad(self, set_to_zero: bool = False) -> None:
        """Drop (or zero) every parameter's gradient."""
        for param in self._params:
            param.clear_gradient(set_to_zero)

    def state_dict(self) -> Dict[str, np.ndarray]:
        """Moments and bias-correction powers as numpy, keyed ``<parameter name>_<slot>``."""
        return {
            f"{param.name}_{slot}": value.numpy().copy()
            for param, st in zip(self._params, self._state)
            for slot, value in st.items()
        } | {"learning_rate": self._lr.numpy().copy()}

    def check_state_dict(self, state: Mapping[str, object]) -> None:
        """Raise for a :meth:`state_dict` output this optimizer cannot step from, changing nothing.

        Raises:
            OptimizerStateError: (a ValueError) an entry missing, of another shape than its
                parameter's slot, not finite, or beyond what the slot can hold (a negative second
                moment, a bias-correction power outside [0, beta], a negative learning rate).
        """
        bounds = self._slot_bounds()
        for param, st in zip(self._params, self._state):
            for slot, tensor in st.items():
                _check_entry(state, f"{param.name}_{slot}", list(tensor.shape), bounds[slot])
        if "learning_rate" in state:
            _check_entry(state, "learning_rate", [1], (0.0, math.inf))

    def set_state_dict(self, state: Dict[str, np.ndarray]) -> None:
        """Restore :meth:`state_dict` output: all of it, or (OptimizerStateError, from
        :meth:`check_state_dict`) none."""
        self.check_state_dict(state)
        for param, st in zip(self._params, self._state):
            for slot, tensor in st.items():
                tensor.set_value(np.asarray(state[f"{param.name}_{slot}"], dtype=np.float32))
        if "learning_rate" in state:
            self._lr.set_value(np.asarray(state["learning_rate"], dtype=np.float32))
            self._lr_value = float(self._lr.numpy().reshape(-1)[0])


class RMSProp(Adam):
    """RMSProp (Tieleman & Hinton, 2012), the optimizer of A3C (Mnih et al., 2016), with optional
    momentum, centering and global gradient-norm clipping.

    ``ms = alpha * ms + (1 - alpha) * g^2``; ``mom = momentum * mom + lr * g / sqrt(ms + epsilon)``;
    ``param -= mom`` (``ms - mean_grad^2`` in place of ``ms`` when centered). Epsilon sits inside the
    square root, as in TensorFlow's RMSProp that A3C and OpenAI Baselines' A2C used. The state
    starts at zero. It calls paddle's fused ``rmsprop_`` kernel once per parameter, so its updates
    are those of ``paddle.optimizer.RMSProp`` (checked in the tests); the clipping, learning-rate
    and state-dict bookkeeping are :class:`Adam`'s.
    """

    def __init__(
        self,
        parameters: List[paddle.Tensor],
        *,
        learning_rate: float = 7e-4,
        alpha: float = 0.99,
        epsilon: float = 1e-5,
        momentum: float = 0.0,
        centered: bool = False,
        grad_clip: Optional[float] = None,
    ) -> None:
        self.alpha = check_range("alpha", alpha, 0.0, 1.0)
        self.momentum = check_range("momentum", momentum, 0.0, 1.0)
        self.centered = bool(centered)
        parameters = list(parameters)
        if not parameters:
            raise ValueError("RMSProp needs at least one parameter, got none")
        super().__init__(parameters, learning_rate=learning_rate, epsilon=epsilon, grad_clip=grad_clip)

    def _fresh_state(self, param: paddle.Tensor) -> Dict[str, paddle.Tensor]:
        return {
            "mean_square": paddle.zeros_like(param),
            "moment": paddle.zeros_like(param),
            "mean_grad": paddle.zeros_like(param),
        }

    def _slot_bounds(self) -> Dict[str, Tuple[float, float]]:
        return {
            "mean_square": (0.0, math.inf),
            "moment": (-math.inf, math.inf),
            "mean_grad": (-math.inf, math.inf),
        }

    def _update(self, param: paddle.Tensor, grad: paddle.Tensor, st: Dict[str, paddle.Tensor]) -> None:
        _C_ops.rmsprop_(
            param,
            st["mean_square"],
            grad,
            st["moment"],
            self._lr,
            st["mean_grad"],
            None,  # type: ignore[arg-type]  # no master weight (paddle's stub omits Optional)
            self.epsilon,
            self.alpha,
            self.momentum,
            self.centered,
            False,
        )


class ScheduledOptimizer:
    """An optimizer (with ``set_lr``, as :class:`Adam`) whose learning rate is ``rate()`` at every step.

    The rate is read when the step is taken, so an optimizer made late (at a task's first update)
    and restored from a checkpoint steps at the schedule's rate, not at the one saved with it.
    """

    def __init__(self, optimizer: Adam, rate: Callable[[], float]) -> None:
        self.optimizer = optimizer
        self.rate = rate

    def step(self) -> None:
        """Set the learning rate to ``rate()``, then step."""
        self.optimizer.set_lr(self.rate())
        self.optimizer.step()

    def clear_grad(self, set_to_zero: bool = False) -> None:
        self.optimizer.clear_grad(set_to_zero)

    def state_dict(self) -> Dict[str, np.ndarray]:
        return self.optimizer.state_dict()

    def set_state_dict(self, state: Dict[str, np.ndarray]) -> None:
        self.optimizer.set_state_dict(state)

    def check_state_dict(self, state: Mapping[str, object]) -> None:
        """The wrapped optimizer's :meth:`Adam.check_state_dict`."""
        self.optimizer.check_state_dict(state)

    def get_lr(self) -> float:
        """The learning rate of the last step (the optimizer's before the first)."""
        return self.optimizer.get_lr()

    @property
    def last_grad_norm(self) -> Optional[float]:
        """The wrapped optimizer's :attr:`Adam.last_grad_norm`."""
        return self.optimizer.last_grad_norm


def _check_entry(state: Mapping[str, object], key: str, shape: List[int], bounds: Tuple[float, float]) -> None:
    """``state[key]`` is an array of ``shape`` whose values are finite and within ``bounds``."""
    if key not in state:
        raise OptimizerStateError(key, "is missing")
    value = state[key]
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "fiu":
        raise OptimizerStateError(key, f"is {type(value).__name__}, not an array of numbers")
    if list(value.shape) != shape:
        raise OptimizerStateError(key, f"has shape {list(value.shape)}, the optimizer keeps {shape}")
    if value.size == 0:
        return
    if not np.all(np.isfinite(value)):
        raise OptimizerStateError(key, "holds NaN or infinite values")
    low, high = float(np.min(value)), float(np.max(value))
    if low < bounds[0] or high > bounds[1]:
        raise OptimizerStateError(
            key, f"holds values in [{low:g}, {high:g}], beyond the possible [{bounds[0]:g}, {bounds[1]:g}]"
        )
