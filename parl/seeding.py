"""Seeding every random source parl uses."""

import random

import numpy as np


def seed_everything(seed: int) -> None:
    """Seed Python's, numpy's and PaddlePaddle's global generators (initial weights depend on the last)."""
    import paddle

    random.seed(seed)
    np.random.seed(seed)
    paddle.seed(seed)
