"""parl.layers.compiled: one piece of math read through plain layers or their fast callables."""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import paddle
import pytest

from parl import layers
from parl.layers import LayersNotBuilt
from parl.layers.compiled import chain, fast, plain, reads_mode, stands_in_for


def obs(rows: int = 5, width: int = 3) -> paddle.Tensor:
    return paddle.to_tensor(np.random.default_rng(rows).standard_normal((rows, width)).astype(np.float32))


def test_a_chain_runs_its_layers_in_order_either_way() -> None:
    stack = [layers.fc(8, act="relu"), layers.layer_norm(), layers.fc(2, act="tanh", bias=False)]
    x = obs()
    expected = stack[2](stack[1](stack[0](x))).numpy()
    np.testing.assert_array_equal(chain(plain, stack)(x).numpy(), expected)
    np.testing.assert_array_equal(chain(fast, stack)(x).numpy(), expected)
    np.testing.assert_array_equal(chain(fast, [])(x).numpy(), x.numpy())


def test_plain_builds_layers_and_fast_needs_them_built() -> None:
    layer = layers.fc(4)
    with pytest.raises(LayersNotBuilt, match=layer.name):
        chain(fast, [layer])
    chain(plain, [layer])(obs())  # the first plain call builds it
    assert layer.built and callable(chain(fast, [layer]))


def test_fast_callables_see_weights_set_later() -> None:
    layer = layers.fc(4)
    x = obs()
    layer(x)
    call = layer.fast()
    layer.set_arrays({"w": np.ones((3, 4), np.float32), "b": np.full(4, 2.0, np.float32)})
    np.testing.assert_array_equal(call(x).numpy(), layer(x).numpy())


def test_reads_mode_trusts_only_the_layers_own_declaration() -> None:
    class Dropoutish(layers.FC):
        """May read is_training: it does not say otherwise, so it is not trusted as its parent is."""

    assert not reads_mode([layers.fc(2), layers.lstm(3), layers.layer_norm()])
    assert reads_mode([layers.fc(2), layers.batch_norm()])
    assert reads_mode([Dropoutish(2)])


class Doubler:
    def __init__(self, factor: float = 2.0) -> None:
        self.factor = factor

    def value(self, x: float) -> float:
        return self.factor * x

    @stands_in_for(["value"])
    def compile_value(self) -> Optional[Callable[[float], float]]:
        factor = self.factor
        return lambda x: factor * x


class Tripler(Doubler):
    def value(self, x: float) -> float:
        return 3.0 * x


class BelowTripler(Tripler):
    pass


class OwnCompiled(Tripler):
    def compile_value(self) -> Optional[Callable[[float], float]]:
        return lambda x: 3.0 * x


class Untouched(Doubler):
    """A subclass that leaves ``value`` alone keeps the compiled piece."""


def test_a_compiled_piece_never_stands_in_for_an_overriding_method() -> None:
    assert Doubler().compile_value()(2.0) == 4.0
    assert Untouched().compile_value()(2.0) == 4.0
    assert Tripler().compile_value() is None
    assert BelowTripler().compile_value() is None
    assert OwnCompiled().compile_value()(2.0) == 6.0


@pytest.mark.parametrize("methods", [[], "value", [1]])
def test_stands_in_for_names_a_bad_method_list(methods) -> None:
    with pytest.raises(ValueError, match="stands_in_for needs"):
        stands_in_for(methods)
