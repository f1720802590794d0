"""LayerFunc: a callable layer that owns one named set of parameters.

    fc1 = layers.fc(64, act="relu")
    h = fc1(x)        # first call infers the input size and creates fc_0.w, fc_0.b
    h2 = fc1(other)   # same parameters: calling one LayerFunc twice shares them

Parameters are created lazily on the first call, so a layer never needs its
input size. A layer that has not been called yet can still receive values
(:meth:`LayerFunc.set_arrays`), which is how a fresh clone or a restored
model lines up with a trained one before it has seen any input.

A built layer also gives a fast callable of itself (:meth:`LayerFunc.fast`) for
compiled acting paths (:mod:`parl.layers.compiled`).
"""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict
from typing import Any, Callable, ClassVar, Dict, List, Optional, Sequence

import numpy as np
import paddle

_name_lock = threading.Lock()
_name_counters: Dict[str, "itertools.count[int]"] = defaultdict(itertools.count)


def unique_name(prefix: str) -> str:
    """A process-wide unique layer name such as ``fc_0``, ``fc_1``."""
    with _name_lock:
        return f"{prefix}_{next(_name_counters[prefix])}"


class LayersNotBuilt(Exception):
    """A layer has no parameters yet, so it has no fast callable (:meth:`LayerFunc.fast`).

    Compiled acting paths are made after the first plain call, which builds every layer it reaches.
    """


class ParamSpec:
    """Shape, dtype and initializer of one parameter of a layer."""

    __slots__ = ("shape", "dtype", "initializer")

    def __init__(
        self,
        shape: Sequence[int],
        dtype: str = "float32",
        initializer: Optional[paddle.nn.initializer.Initializer] = None,
    ) -> None:
        self.shape = [int(d) for d in shape]
        self.dtype = dtype
        self.initializer = initializer


class LayerFunc:
    """Base class of every parl layer.

    Subclasses implement :meth:`param_specs` (which parameters to create,
    given the first input) and :meth:`forward` (the computation, reading
    parameters from ``self.params``). Parameter names are
    ``<layer name>.<suffix>``, unique in the process.
    """

    def __init__(self, prefix: str, name: Optional[str] = None) -> None:
        self.name = name if name is not None else unique_name(prefix)
        self.params: Dict[str, paddle.Tensor] = {}
        self._build_lock = threading.Lock()

    # -- to implement -----------------------------------------------------
    def param_specs(self, first_input: paddle.Tensor) -> Dict[str, ParamSpec]:
        """Parameter suffix -> spec, computed from the first input."""
        raise NotImplementedError

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        """The layer's computation on a built layer."""
        raise NotImplementedError

    # -- shared machinery -------------------------------------------------
    @property
    def built(self) -> bool:
        """Whether the parameters exist."""
        return bool(self.params) or self._built_without_params

    _built_without_params = False

    #: Whether :meth:`forward` computes the same in training and evaluation mode (it never reads
    #: :func:`is_training`). Read from the layer's own class only (:func:`parl.layers.compiled.reads_mode`),
    #: so a subclass that may read the mode is not taken for its parent: it declares it again or is not trusted.
    same_in_both_modes: ClassVar[bool] = False

    def fast(self) -> Callable[..., Any]:
        """The layer's computation as a callable for acting, taking what :meth:`forward` takes.

        The default is :meth:`forward` itself; layers with a cheaper form of the same computation
        (the same values, bit for bit) return that instead, as :class:`~parl.layers.fc.FC` does. The
        callable reads the parameters held now: values set later (``set_arrays``, weight copies) are
        seen, since those write into the same tensors.

        Raises:
            LayersNotBuilt: the layer has no parameters yet.
        """
        self._check_built()
        return self.forward

    def _check_built(self) -> None:
        if not self.built:
            raise LayersNotBuilt(f"layer {self.name} has no parameters yet; call it once before compiling it")

    def __call__(self, x: paddle.Tensor) -> paddle.Tensor:
        if not self.built:
            self._build_from_input(x)
        return self.forward(x)

    def _build_from_input(self, x: paddle.Tensor) -> None:
        with self._build_lock:
            if self.built:
                return
            specs = self.param_specs(x)
            created = {
                suffix: self._create(suffix, spec.shape, spec.dtype, spec.initializer) for suffix, spec in specs.items()
            }
            self._install(created)

    def _create(
        self,
        suffix: str,
        shape: List[int],
        dtype: str,
        initializer: Optional[paddle.nn.initializer.Initializer],
    ) -> paddle.Tensor:
        attr = paddle.ParamAttr(name=f"{self.name}.{suffix}", initializer=initializer)
        return paddle.create_parameter(shape=shape, dtype=dtype, attr=attr)  # type: ignore[arg-type]  # paddle's stub lists literal dtype names only

    def _install(self, created: Dict[str, paddle.Tensor]) -> None:
        if not created:
            self._built_without_params = True
        # In suffix order whichever way the layer is built (by a call, or from arrays, which come
        # in any order): an optimizer's parameter list, and so the summation order of a global
        # gradient norm, is then the same for a layer restored from a checkpoint.
        self.params = {suffix: created[suffix] for suffix in sorted(created)}

    def parameters(self) -> List[paddle.Tensor]:
        """The trainable parameters, in suffix order (empty until built)."""
        return [p for p in self.params.values() if not p.stop_gradient]

    def get_arrays(self) -> Dict[str, np.ndarray]:
        """Every parameter (trainable or not) as a numpy copy, by suffix."""
        return {suffix: p.numpy().copy() for suffix, p in self.params.items()}

    def set_arrays(self, arrays: Dict[str, np.ndarray]) -> None:
        """Set parameter values by suffix; builds an unbuilt layer from them.

        Raises:
            ValueError: a suffix is missing or unknown, or a shape differs.
        """
        with self._build_lock:
            if not self.params:
                created = {}
                for suffix, value in arrays.items():
                    value = np.asarray(value)
                    param = self._create(suffix, list(value.shape), str(value.dtype), None)
                    param.stop_gradient = suffix in self.non_trainable_suffixes()
                    param.set_value(value)
                    created[suffix] = param
                self._install(created)
                return
        expected = set(self.params)
        if set(arrays) != expected:
            raise ValueError(f"layer {self.name}: expected parameters {sorted(expected)}, got {sorted(arrays)}")
        for suffix, value in arrays.items():
            param = self.params[suffix]
            value = np.asarray(value)
            if list(value.shape) != list(param.shape):
                raise ValueError(f"parameter {param.name}: expected shape {list(param.shape)}, got {list(value.shape)}")
            param.set_value(value.astype(param.numpy().dtype, copy=False))

    def non_trainable_suffixes(self) -> Sequence[str]:
        """Suffixes of parameters that hold statistics rather than weights."""
        return ()

    def assign_from(self, source: "LayerFunc", decay: float) -> None:
        """``self = decay * self + (1 - decay) * source``, parameter by parameter.

        ``decay == 0`` is a hard copy. An unbuilt ``self`` is built from
        ``source``'s values.
        """
        if not source.params:
            if source._built_without_params or not self.params:
                return
            raise ValueError(f"layer {source.name} has no parameters yet; call it before copying")
        if not self.params:
            self.set_arrays(source.get_arrays())
            return
        if list(self.params) != list(source.params):
            raise ValueError(
                f"layers {source.name} and {self.name} differ: {list(source.params)} vs {list(self.params)}"
            )
        with paddle.no_grad():
            for suffix, dst in self.params.items():
                src = source.params[suffix]
                if list(src.shape) != list(dst.shape):
                    raise ValueError(
                        f"parameter {src.name} has shape {list(src.shape)} but {dst.name} has {list(dst.shape)}"
                    )
                if decay == 0.0:
                    paddle.assign(src, output=dst)
                else:
                    paddle.assign(decay * dst + (1.0 - decay) * src, output=dst)


ActivationFn = Callable[[paddle.Tensor], paddle.Tensor]


def activation(name: Optional[str]) -> Optional[ActivationFn]:
    """The activation function called ``name`` (None for linear)."""
    if name is None:
        return None
    from paddle import _C_ops

    table: Dict[str, ActivationFn] = {
        "relu": _C_ops.relu,
        "tanh": _C_ops.tanh,
        "sigmoid": _C_ops.sigmoid,
        "softmax": lambda x: _C_ops.softmax(x, -1),
        "softplus": paddle.nn.functional.softplus,
        "elu": paddle.nn.functional.elu,
        "gelu": paddle.nn.functional.gelu,
        "leaky_relu": paddle.nn.functional.leaky_relu,
    }
    if name not in table:
        raise ValueError(f"act must be one of {sorted(table)} or None, got {name!r}")
    return table[name]


_mode = threading.local()


def is_training() -> bool:
    """Whether layers in this thread run in training mode (the default)."""
    return getattr(_mode, "training", True)


class training_mode:  # noqa: N801 - used as a context manager, like paddle.no_grad
    """Context manager that sets train (True) or eval (False) mode for this thread.

    Modes are per thread, so the prediction thread can run batch_norm in eval
    mode while the training thread updates its statistics.
    """

    def __init__(self, training: bool) -> None:
        self.training = bool(training)
        self._previous = True

    def __enter__(self) -> "training_mode":
        self._previous = is_training()
        _mode.training = self.training
        return self

    def __exit__(self, *exc_info: object) -> None:
        _mode.training = self._previous


def check_count(layer: str, name: str, value: object) -> int:
    """``value`` as an int >= 1: a layer's size, width or count of rows, gates or members.

    Raises:
        ValueError: ``"<layer> <name> must be a positive integer, got <value>"``.
    """
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{layer} {name} must be a positive integer, got {value!r}")
    return value
