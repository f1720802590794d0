"""Q-values over discrete actions, plain or dueling, from an input encoder: MLPQModel (a flat ``obs``)
and MultiInputQModel (several inputs, :class:`~parl.models.encoders.MultiInputEncoder`)."""

from __future__ import annotations

from typing import Callable, Dict, Mapping, Optional, Sequence

import paddle

from parl import layers
from parl.core.model import Model
from parl.core.specs import SpecList
from parl.layers.compiled import Bind, chain, fast, plain, stands_in_for
from parl.models.conv_torso import MINATAR_CONVS, ConvSpec
from parl.models.encoders import InputEncoder, ObsInput, multi_input_encoder
from parl.validation import check_int

TensorDict = Dict[str, paddle.Tensor]
#: ``inputs -> Q``, ``[B, num_actions]``.
ValueFn = Callable[[TensorDict], paddle.Tensor]


class QModel(Model):
    """``value(inputs) -> [B, num_actions]``: ReLU ``hidden_sizes`` layers over what ``encoder`` makes of
    the inputs, then the Q head. The base of :class:`MLPQModel` and :class:`MultiInputQModel`.

    With ``dueling=True`` the head is ``V(s) + A(s, a) - mean_a A(s, a)``
    (Wang et al., 2016).
    """

    def __init__(
        self, encoder: InputEncoder, num_actions: int, hidden_sizes: Sequence[int] = (64, 64), dueling: bool = False
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.num_actions = check_int("num_actions", num_actions, 1)
        self.hidden = [layers.fc(check_int("hidden_sizes", h, 1), act="relu") for h in hidden_sizes]
        self.dueling = bool(dueling)
        if self.dueling:
            self.advantage = layers.fc(num_actions)
            self.state_value = layers.fc(1)
        else:
            self.q = layers.fc(num_actions)

    def get_input_specs(self) -> SpecList:
        return self.encoder.get_input_specs()

    def get_action_specs(self) -> SpecList:
        return [("action", dict(shape=[1], dtype="int64", range=[0, self.num_actions]))]

    def value(self, inputs: TensorDict) -> paddle.Tensor:
        """Q-values of every action, ``[B, num_actions]``."""
        return self._value(plain)(inputs)

    @stands_in_for(["value"])
    def compile_value(self) -> Optional[ValueFn]:
        """:meth:`value` over the layers' fast callables (None on a subclass that overrides ``value``).

        Raises:
            LayersNotBuilt: before the first call of :meth:`value`.
        """
        return self._value(fast)

    def _value(self, bind: Bind) -> ValueFn:
        if not self.dueling:
            return self.encoder.into(bind, chain(bind, [*self.hidden, self.q]))
        advantage_head, state_value = bind(self.advantage), bind(self.state_value)
        trunk = self.encoder.into(bind, chain(bind, self.hidden))

        def dueling(inputs: TensorDict) -> paddle.Tensor:
            h = trunk(inputs)
            advantage = advantage_head(h)
            return state_value(h) + advantage - advantage.mean(axis=-1, keepdim=True)

        return dueling


class MLPQModel(QModel):
    """``value({"obs": [B, obs_dim]}) -> [B, num_actions]``.

    With ``dueling=True`` the head is ``V(s) + A(s, a) - mean_a A(s, a)``
    (Wang et al., 2016).
    """

    def __init__(
        self, obs_dim: int, num_actions: int, hidden_sizes: Sequence[int] = (64, 64), dueling: bool = False
    ) -> None:
        self.obs_dim = check_int("obs_dim", obs_dim, 1)
        super().__init__(ObsInput(self.obs_dim), num_actions, hidden_sizes, dueling)


class MultiInputQModel(QModel):
    """``value({name: [B, *shape], ...}) -> [B, num_actions]``: a
    :class:`~parl.models.encoders.MultiInputEncoder` (a small CNN per image input, an MLP per other
    input, concatenated), then ReLU ``hidden_sizes`` layers and the Q head (dueling with ``dueling=True``).

    Args:
        observation_shapes, observation_dtypes: the inputs (from a Dict or Tuple observation space).
        num_actions: size of the discrete action space.
        convs, image_hidden_size, vector_hidden_sizes: the encoder's, as :class:`MultiInputEncoder`'s.
    """

    def __init__(
        self,
        observation_shapes: Mapping[str, Sequence[int]],
        num_actions: int,
        observation_dtypes: Optional[Mapping[str, str]] = None,
        convs: Sequence[ConvSpec] = MINATAR_CONVS,
        image_hidden_size: int = 128,
        vector_hidden_sizes: Sequence[int] = (64,),
        hidden_sizes: Sequence[int] = (64,),
        dueling: bool = False,
    ) -> None:
        encoder = multi_input_encoder(
            observation_shapes, observation_dtypes, convs, image_hidden_size, vector_hidden_sizes
        )
        super().__init__(encoder, num_actions, hidden_sizes, dueling)
