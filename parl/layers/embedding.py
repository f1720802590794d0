"""Embedding (lookup table) layer."""

from __future__ import annotations

from typing import Dict, Optional

import paddle
import paddle.nn.functional as F

from parl.layers.layer_func import LayerFunc, ParamSpec


class Embedding(LayerFunc):
    """Maps int64 ids of any shape to float32 rows of a [num_embeddings, embedding_dim] table."""

    same_in_both_modes = True

    def __init__(self, num_embeddings: int, embedding_dim: int, name: Optional[str] = None) -> None:
        for arg, value in (("num_embeddings", num_embeddings), ("embedding_dim", embedding_dim)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"embedding {arg} must be a positive integer, got {value!r}")
        super().__init__("embedding", name)
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim

    def param_specs(self, first_input: paddle.Tensor) -> Dict[str, ParamSpec]:
        init = paddle.nn.initializer.Normal(0.0, self.embedding_dim**-0.5)
        return {"w": ParamSpec([self.num_embeddings, self.embedding_dim], "float32", init)}

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        """Rows of the table for ``x``: shape ``x.shape + [embedding_dim]``."""
        return F.embedding(x, self.params["w"])


def embedding(num_embeddings: int, embedding_dim: int, name: Optional[str] = None) -> Embedding:
    """An embedding LayerFunc with ``num_embeddings`` rows of size ``embedding_dim``."""
    return Embedding(num_embeddings, embedding_dim, name=name)
