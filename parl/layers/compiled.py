"""One piece of math, two ways of reading its layers: as they are, or as fast callables.

A model writes each forward piece once, as a function of how it reads its
layers (a :data:`Bind`), and gets both paths from it:

    def _value(self, bind: Bind) -> Callable[[TensorDict], paddle.Tensor]:
        body = chain(bind, self.hidden + [self.q])
        return lambda inputs: body(inputs["obs"])

    def value(self, inputs):                 # plain: the layers themselves (each builds on first call)
        return self._value(plain)(inputs)

    @stands_in_for(["value"])
    def compile_value(self):                 # compiled: each layer's LayerFunc.fast(), made once
        return self._value(fast)

``fast`` raises :class:`~parl.layers.layer_func.LayersNotBuilt` for a layer
without parameters, so compiled pieces are made after the first plain call.
They are for acting: the task runs them without gradient, under its weights
lock, and evaluation mode where a layer reads it (:func:`reads_mode`).

:func:`stands_in_for` keeps a compiled piece from standing in for a plain
method it does not compute: on a subclass that overrides that method (and not
the compile method), the compile method returns None and callers take the
plain path.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Iterable, Optional, Sequence, TypeVar

import paddle

from parl.layers.layer_func import LayerFunc

#: How a piece of math reads a layer: :func:`plain` or :func:`fast`.
Bind = Callable[[LayerFunc], Callable[..., Any]]

Owner = TypeVar("Owner")
Compiled = TypeVar("Compiled")


def plain(layer: LayerFunc) -> LayerFunc:
    """The layer itself: the plain path (it builds on its first call, and runs with gradient when asked)."""
    return layer


def fast(layer: LayerFunc) -> Callable[..., Any]:
    """``layer.fast()``: the compiled path.

    Raises:
        LayersNotBuilt: the layer has no parameters yet.
    """
    return layer.fast()


def chain(bind: Bind, layers: Sequence[LayerFunc]) -> Callable[[paddle.Tensor], paddle.Tensor]:
    """``x -> layers[-1](...layers[0](x))``, each layer read through ``bind`` (made now, called later)."""
    calls = tuple(map(bind, layers))
    if len(calls) == 1:
        return calls[0]

    def chained(x: paddle.Tensor) -> paddle.Tensor:
        for call in calls:
            x = call(x)
        return x

    return chained


def reads_mode(layers: Iterable[LayerFunc]) -> bool:
    """Whether any of ``layers`` may compute differently in evaluation mode: its own class does not
    declare :attr:`~parl.layers.layer_func.LayerFunc.same_in_both_modes` (batch norm does not)."""
    return not all(vars(type(layer)).get("same_in_both_modes", False) for layer in layers)


def stands_in_for(
    methods: Sequence[str],
) -> Callable[[Callable[[Owner], Optional[Compiled]]], Callable[[Owner], Optional[Compiled]]]:
    """Decorates a compile method whose result computes what the plain ``methods`` of its class compute.

    On an object whose class replaces one of ``methods`` below the class that defines the compile
    method (and does not define a compile method of its own), the compile method returns None: the
    compiled piece would not compute what that object's plain method does.
    """
    names = () if isinstance(methods, str) else tuple(methods)
    if not names or not all(isinstance(name, str) for name in names):
        raise ValueError(f"stands_in_for needs the names of the plain methods, got {methods!r}")

    def decorate(compile_method: Callable[[Owner], Optional[Compiled]]) -> Callable[[Owner], Optional[Compiled]]:
        @functools.wraps(compile_method)
        def guarded(self: Owner) -> Optional[Compiled]:
            cls = type(self)
            owner = next((c for c in cls.__mro__ if any(v is guarded for v in vars(c).values())), cls)
            if any(_resolve(cls, name) is not _resolve(owner, name) for name in names):
                return None
            return compile_method(self)

        return guarded

    return decorate


def _resolve(cls: type, name: str) -> Any:
    """What ``cls.name`` is defined as, looked up along the MRO without binding."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    raise AttributeError(f"{cls.__name__} has no attribute {name!r}")
