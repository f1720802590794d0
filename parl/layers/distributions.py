"""Action distributions shared by the policy-gradient family and SAC.

Every distribution works on batches: parameters are ``[B, ...]`` tensors and
:meth:`log_prob` / :meth:`entropy` return ``[B, 1]``.

    dist = Categorical(logits)                     # discrete actions, int64 [B, 1]
    dist = DiagGaussian(mean, std)                 # continuous actions, float32 [B, D]
    action, log_prob = TanhGaussian(mean, log_std).rsample()   # SAC: squashed to (-1, 1)
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import paddle
import paddle.nn.functional as F

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class Categorical:
    """Softmax over ``logits`` ``[B, N]``; actions are int64 ``[B, 1]``."""

    def __init__(self, logits: paddle.Tensor) -> None:
        self.logits = logits
        # Computed now, under the gradient mode the logits were made in. Logits without gradient (acting)
        # wait for the first read: the same values whenever it comes, and the mode needs none.
        self._log_probs: Optional[paddle.Tensor] = None
        if not logits.stop_gradient:
            _ = self.log_probs

    @property
    def log_probs(self) -> paddle.Tensor:
        """``log softmax(logits)``, ``[B, N]``."""
        if self._log_probs is None:
            self._log_probs = F.log_softmax(self.logits, axis=-1)
        return self._log_probs

    def sample(self) -> paddle.Tensor:
        """One action per row, drawn from paddle's global generator."""
        return paddle.multinomial(paddle.exp(self.log_probs), num_samples=1)

    def mode(self) -> paddle.Tensor:
        """The most probable action per row."""
        return paddle.argmax(self.logits, axis=-1, keepdim=True)

    def log_prob(self, actions: paddle.Tensor) -> paddle.Tensor:
        """``log pi(a)`` of int64 ``[B, 1]`` actions, ``[B, 1]``."""
        return paddle.take_along_axis(self.log_probs, actions, axis=1)

    def entropy(self) -> paddle.Tensor:
        """``[B, 1]``."""
        return -(paddle.exp(self.log_probs) * self.log_probs).sum(axis=-1, keepdim=True)


class DiagGaussian:
    """Independent normals per action dimension; actions are float32 ``[B, D]``."""

    def __init__(self, mean: paddle.Tensor, std: paddle.Tensor) -> None:
        self.mean = mean
        self.std = std

    def sample(self) -> paddle.Tensor:
        """``mean + std * noise``."""
        return self.mean + self.std * paddle.randn(self.mean.shape, dtype=self.mean.dtype)

    def mode(self) -> paddle.Tensor:
        """The mean."""
        return self.mean

    def log_prob(self, actions: paddle.Tensor) -> paddle.Tensor:
        """Summed over action dimensions, ``[B, 1]``."""
        z = (actions - self.mean) / self.std
        return (-0.5 * z * z - paddle.log(self.std) - _HALF_LOG_2PI).sum(axis=-1, keepdim=True)

    def entropy(self) -> paddle.Tensor:
        """Summed over action dimensions, ``[B, 1]``."""
        return (paddle.log(self.std) + 0.5 + _HALF_LOG_2PI).sum(axis=-1, keepdim=True)


class TanhGaussian:
    """``tanh`` of a diagonal normal: actions in (-1, 1), as in SAC (Haarnoja et al., 2018, appendix C)."""

    def __init__(self, mean: paddle.Tensor, log_std: paddle.Tensor) -> None:
        self.base = DiagGaussian(mean, paddle.exp(log_std))

    def rsample(self) -> Tuple[paddle.Tensor, paddle.Tensor]:
        """A reparameterized sample and its log-probability ``[B, 1]`` (gradients flow through both)."""
        u = self.base.sample()
        # log(1 - tanh(u)^2) = 2 * (log 2 - u - softplus(-2u)), stable for large |u|
        correction = 2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))
        return paddle.tanh(u), self.base.log_prob(u) - correction.sum(axis=-1, keepdim=True)

    def mode(self) -> paddle.Tensor:
        """``tanh(mean)``."""
        return paddle.tanh(self.base.mean)
