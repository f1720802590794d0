"""parl.layers: LayerFunc constructors. Each call returns a new layer that owns its parameters."""

from parl.layers.conv2d import Conv2D, conv2d
from parl.layers.embedding import Embedding, embedding
from parl.layers.fc import FC, fc
from parl.layers.layer_func import LayerFunc, LayersNotBuilt, ParamSpec, is_training, training_mode, unique_name
from parl.layers.norm import BatchNorm, LayerNorm, batch_norm, layer_norm
from parl.layers.recurrent import GRU, LSTM, gru, lstm

__all__ = [
    "FC",
    "GRU",
    "LSTM",
    "BatchNorm",
    "Conv2D",
    "Embedding",
    "LayerFunc",
    "LayerNorm",
    "LayersNotBuilt",
    "ParamSpec",
    "batch_norm",
    "conv2d",
    "embedding",
    "fc",
    "gru",
    "is_training",
    "layer_norm",
    "lstm",
    "training_mode",
    "unique_name",
]
