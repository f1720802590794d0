"""Input encoders: how a model's trunk takes its input from the input dict.

    encoder = ObsInput(4)                                        # the trunk reads inputs["obs"], [B, 4]
    encoder = MultiInputEncoder({"image": [7, 7, 1], "vec": [3]}, {"image": "uint8", "vec": "float32"})
    specs = encoder.get_input_specs()                            # one spec per input, its shape and dtype
    features = encoder.features(plain)                           # inputs -> [B, encoder.size]

:class:`ObsInput` holds no layers (the single-``obs`` models keep their weight names); a
:class:`MultiInputEncoder` runs a small convolutional torso (:mod:`parl.models.conv_torso`) over each
image input (rank 3, channels first or last as the space gives them; uint8 scaled by 1/255), an MLP
over each other input (flattened), and concatenates the results, as Stable-Baselines3's
``CombinedExtractor`` and RLlib's default models for Dict spaces do.
"""

from __future__ import annotations

import operator
from typing import Callable, Dict, List, Mapping, Optional, Sequence, cast

import numpy as np
import paddle

from parl import layers
from parl.core.model import Model
from parl.core.specs import SpecList
from parl.layers.compiled import Bind, chain
from parl.layers.layer_func import LayerFunc
from parl.models.conv_torso import MINATAR_CONVS, ConvSpec, conv_layers, conv_output_side, torso
from parl.validation import check_int

TensorMap = Mapping[str, paddle.Tensor]
#: ``inputs -> features``, ``[B, size]``.
FeaturesFn = Callable[[TensorMap], paddle.Tensor]
#: The dtypes an input may have.
INPUT_DTYPES = ("float32", "uint8")


class InputEncoder(Model):
    """The inputs a model reads and how its trunk reads them: :meth:`features` maps the input dict to
    one ``[B, size]`` tensor. Declares the input specs of the model that holds it."""

    #: Width of the features (None: the input's own, known to the model).
    size: Optional[int] = None

    def features(self, bind: Bind) -> FeaturesFn:
        """``inputs -> [B, size]``, the layers read through ``bind``."""
        raise NotImplementedError

    def into(self, bind: Bind, body: Callable[[paddle.Tensor], paddle.Tensor]) -> FeaturesFn:
        """``inputs -> body(features(inputs))``."""
        features = self.features(bind)
        return lambda inputs: body(features(inputs))

    def zero_inputs(self, rows: int = 1) -> Dict[str, paddle.Tensor]:
        """Zeros of every input, ``rows`` of them (to build the layers)."""
        out = {}
        for name, spec in self.get_input_specs():
            shape = cast(Sequence[int], spec["shape"])
            out[name] = paddle.to_tensor(np.zeros([rows, *shape], dtype=str(spec["dtype"])))
        return out


class ObsInput(InputEncoder):
    """The float32 ``obs`` input of ``[obs_dim]``, read as it is (no layers)."""

    def __init__(self, obs_dim: int) -> None:
        super().__init__()
        self.obs_dim = check_int("obs_dim", obs_dim, 1)
        self.size = self.obs_dim

    def get_input_specs(self) -> SpecList:
        return [("obs", dict(shape=[self.obs_dim], dtype="float32"))]

    def features(self, bind: Bind) -> FeaturesFn:
        return operator.itemgetter("obs")

    def into(self, bind: Bind, body: Callable[[paddle.Tensor], paddle.Tensor]) -> FeaturesFn:
        return lambda inputs: body(inputs["obs"])


#: Subtracted from a masked action's logit or Q-value: exp(-1e9) is 0 in float32, and 1e9 stays finite in every sum.
MASKED_LOGIT_OFFSET = 1e9


class MaskedObservation(InputEncoder):
    """The ``observation`` input (any shape, read flattened) and the ``action_mask`` input (``[num_actions]``)
    a masked head reads: the inputs of :class:`~parl.models.MaskedMLPActorCritic` and
    :class:`~parl.models.MaskedMLPQModel`.

    Raises:
        ValueError: an empty ``obs_shape`` or a size below 1, ``num_actions`` below 2, or one name for both inputs.
    """

    def __init__(self, obs_shape: Sequence[int], num_actions: int, observation_key: str, mask_key: str) -> None:
        super().__init__()
        shape = list(obs_shape) if isinstance(obs_shape, (list, tuple)) else None
        if not shape:
            raise ValueError(f"obs_shape: expected a non-empty list of sizes, got {obs_shape!r}")
        if observation_key == mask_key:
            raise ValueError(f"observation_key and mask_key must differ, both are {mask_key!r}")
        self.obs_shape = [check_int("obs_shape", size, 1) for size in shape]
        self.num_actions = check_int("num_actions", num_actions, 2)
        self.observation_key, self.mask_key = observation_key, mask_key

    def get_input_specs(self) -> SpecList:
        return [
            (self.observation_key, dict(shape=list(self.obs_shape), dtype="float32")),
            (self.mask_key, dict(shape=[self.num_actions], dtype="float32")),
        ]

    def features(self, bind: Bind) -> FeaturesFn:
        key = self.observation_key
        return lambda inputs: paddle.flatten(inputs[key], start_axis=1)

    def masked(self, values: paddle.Tensor, inputs: TensorMap) -> paddle.Tensor:
        """``values`` (``[B, num_actions]``: logits or Q-values) with each masked action's lowered by
        :data:`MASKED_LOGIT_OFFSET`."""
        return values + (inputs[self.mask_key] - 1.0) * MASKED_LOGIT_OFFSET


def channels_first(shape: Sequence[int]) -> bool:
    """Whether an image of ``shape`` (rank 3) has its channels first: its first side is its smallest
    (``[1, 7, 7]``), else they are last (``[7, 7, 1]``, ``[84, 84, 3]``), as Stable-Baselines3 decides."""
    return int(np.argmin(shape)) == 0


class MultiInputEncoder(InputEncoder):
    """Features of several inputs, concatenated in the order the shapes are given.

    Args:
        observation_shapes: input name -> shape. Rank-3 shapes are images: ``convs`` then a ReLU fc of
            ``image_hidden_size``, channels first or last (:func:`channels_first`); others are flattened
            and go through ReLU fc layers of ``vector_hidden_sizes`` (none: as they are).
        observation_dtypes: input name -> ``float32`` or ``uint8`` (default float32); uint8 images are
            scaled by 1/255 as the network's first operation.
        convs: each image's convolutions, ``(filters, size, stride)`` (default MinAtar's: 16 3x3 stride 1).
        image_hidden_size: width of each image's fc layer.
        vector_hidden_sizes: the ReLU layers over each other input.

    Raises:
        ValueError: an empty or bad shape, an unknown dtype, or an image too small for ``convs``, naming its input.
    """

    def __init__(
        self,
        observation_shapes: Mapping[str, Sequence[int]],
        observation_dtypes: Optional[Mapping[str, str]] = None,
        *,
        convs: Sequence[ConvSpec] = MINATAR_CONVS,
        image_hidden_size: int = 128,
        vector_hidden_sizes: Sequence[int] = (64,),
    ) -> None:
        super().__init__()
        self.shapes, self.dtypes = _checked_inputs(observation_shapes, observation_dtypes)
        self.channels_first = {n: channels_first(s) for n, s in self.shapes.items() if len(s) == 3}
        convs = [(int(filters), int(size), int(stride)) for filters, size, stride in convs]
        self.image_convs: Dict[str, List[LayerFunc]] = {}
        self.image_hidden: Dict[str, LayerFunc] = {}
        self.vector_hidden: Dict[str, List[LayerFunc]] = {}
        size = 0
        for name, shape in self.shapes.items():
            if name in self.channels_first:
                height, width = shape[1:] if self.channels_first[name] else shape[:2]
                if min(conv_output_side(height, convs), conv_output_side(width, convs)) < 1:
                    raise ValueError(f"observation_shapes.{name}: {shape} is too small for the convolutions {convs}")
                self.image_convs[name] = conv_layers(convs)
                self.image_hidden[name] = layers.fc(check_int("image_hidden_size", image_hidden_size, 1), act="relu")
                size += image_hidden_size
            else:
                sizes = [check_int("vector_hidden_sizes", h, 1) for h in vector_hidden_sizes]
                self.vector_hidden[name] = [layers.fc(h, act="relu") for h in sizes]
                size += sizes[-1] if sizes else int(np.prod(shape))
        self.size = size

    def get_input_specs(self) -> SpecList:
        return [(name, dict(shape=list(shape), dtype=self.dtypes[name])) for name, shape in self.shapes.items()]

    def features(self, bind: Bind) -> FeaturesFn:
        parts = [(name, self._part(bind, name)) for name in self.shapes]

        def features(inputs: TensorMap) -> paddle.Tensor:
            return paddle.concat([part(inputs[name]) for name, part in parts], axis=1)

        return features

    def _part(self, bind: Bind, name: str) -> Callable[[paddle.Tensor], paddle.Tensor]:
        if name not in self.channels_first:
            hidden = self.vector_hidden[name]
            body = chain(bind, hidden) if hidden else None

            def vector(x: paddle.Tensor) -> paddle.Tensor:
                flat = paddle.reshape(paddle.cast(x, "float32"), [x.shape[0], -1])
                return flat if body is None else body(flat)

            return vector
        scale = 1.0 / 255.0 if self.dtypes[name] == "uint8" else 1.0
        image = torso(bind, self.image_convs[name], self.image_hidden[name], scale)
        if self.channels_first[name]:
            return image
        return lambda x: image(paddle.transpose(x, [0, 3, 1, 2]))


def multi_input_encoder(
    observation_shapes: Mapping[str, Sequence[int]],
    observation_dtypes: Optional[Mapping[str, str]],
    convs: Sequence[ConvSpec],
    image_hidden_size: int,
    vector_hidden_sizes: Sequence[int],
) -> MultiInputEncoder:
    """A :class:`MultiInputEncoder` of the options the multi-input models take, in their order."""
    return MultiInputEncoder(
        observation_shapes,
        observation_dtypes,
        convs=convs,
        image_hidden_size=image_hidden_size,
        vector_hidden_sizes=vector_hidden_sizes,
    )


def _checked_inputs(
    shapes: Mapping[str, Sequence[int]], dtypes: Optional[Mapping[str, str]]
) -> "tuple[Dict[str, List[int]], Dict[str, str]]":
    if not isinstance(shapes, Mapping) or not shapes:
        raise ValueError(f"observation_shapes: expected a mapping of input names to shapes, got {shapes!r}")
    dtypes = dict(dtypes or {})
    unknown = sorted(set(dtypes) - set(shapes))
    if unknown:
        raise ValueError(f"observation_dtypes.{unknown[0]}: no such input; inputs are {list(shapes)}")
    out_shapes, out_dtypes = {}, {}
    for name, shape in shapes.items():
        if not (isinstance(name, str) and name.isidentifier()):
            raise ValueError(f"observation_shapes: input names are letters, digits and '_', got {name!r}")
        if not isinstance(shape, (list, tuple)) or not all(isinstance(d, int) and d >= 1 for d in shape):
            raise ValueError(f"observation_shapes.{name}: expected a list of sizes >= 1, got {shape!r}")
        dtype = dtypes.get(name, "float32")
        if dtype not in INPUT_DTYPES:
            raise ValueError(f"observation_dtypes.{name}: expected one of {list(INPUT_DTYPES)}, got {dtype!r}")
        out_shapes[name], out_dtypes[name] = [int(d) for d in shape], dtype
    return out_shapes, out_dtypes
