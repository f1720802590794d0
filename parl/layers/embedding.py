"""Embedding (lookup table) layer."""

from __future__ import annotations

from typing import Dict, Optional

import paddle
import paddle.nn.functional as F

from parl.layers.layer_func import LayerFunc, ParamSpec, check_count


class Embedding(LayerFunc):
    """Maps int64 ids of any shape to float32 rows of a [num_embeddings, embedding_dim] table."""

    same_in_both_modes = True

    def __init__(self, num_embeddings: int, embedding_dim: int, name: Optional[str] = None) -> None:
        self.num_embeddings = check_count("embedding", "num_embeddings", num_embeddings)
        self.embedding_dim = check_count("embedding", "embedding_dim", embedding_dim)
        super().__init__("embedding", name)

    def param_specs(self, first_input: paddle.Tensor) -> Dict[str, ParamSpec]:
        init = paddle.nn.initializer.Normal(0.0, self.embedding_dim**-0.5)
        return {"w": ParamSpec([self.num_embeddings, self.embedding_dim], "float32", init)}

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        """Rows of the table for ``x``: shape ``x.shape + [embedding_dim]``."""
        return F.embedding(x, self.params["w"])


#: ``layers.embedding(num_embeddings, embedding_dim, name=None)``: an embedding LayerFunc with
#: ``num_embeddings`` rows of size ``embedding_dim``.
embedding = Embedding
