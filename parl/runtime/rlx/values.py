"""What the robot can take of the numbers a client sends: rewards, float observations, the floats of
an ``action_taken`` and metric values, each within float32 and the server's limits.

    reward = checked_reward(message.reward, settings.max_abs_reward, "step:")   # 1e308: ProtocolError
    obs = bounded(spec, obs, settings.max_abs_observation, "init:")             # float spaces only

A client's floats arrive as float64; the robot keeps them as float32 (rewards, observations) and
sums and squares them in its updates, so a value that is finite as float64 but not as float32 (1e308),
or one near float32's largest (3e38), would make every update that holds it non-finite. Each such
value is a :class:`~parl.rlx.errors.ProtocolError` (``bad_message``, naming it) that ends the
connection that sent it, before any agent sees it.
"""

from __future__ import annotations

import numpy as np

from parl.core.specs import Spec
from parl.rlx.errors import BAD_MESSAGE, ProtocolError

#: The largest finite float32: no float a client sends may exceed it in magnitude.
FLOAT32_MAX = float(np.finfo(np.float32).max)
#: Arrays of at most this many values are searched in Python (faster than numpy's calls there).
_SMALL = 16


def checked_reward(reward: float, limit: float, where: str) -> float:
    """``reward`` when ``|reward| <= limit`` (the server's ``max_abs_reward``).

    Raises:
        ProtocolError: ``bad_message``: ``step: reward 1e+308 is beyond max_abs_reward=1e+06``.
    """
    if abs(reward) <= limit:
        return reward
    raise ProtocolError(BAD_MESSAGE, f"{where} reward {reward!r} is beyond max_abs_reward={limit:g}")


def checked_metric(value: float, where: str) -> float:
    """A metric's ``value`` when it is finite as float32 (metrics are written as float32).

    Raises:
        ProtocolError: ``bad_message`` naming the value.
    """
    if abs(value) <= FLOAT32_MAX:
        return value
    raise ProtocolError(BAD_MESSAGE, f"{where} value {value!r} is not finite as float32")


def bounded(spec: Spec, values: np.ndarray, limit: float, setting: str, where: str) -> np.ndarray:
    """``values`` (already checked against ``spec``: finite in its dtype) when ``spec`` is not a float
    spec or every value lies within ``[-limit, limit]``; ``setting`` names the limit in the message.

    Raises:
        ProtocolError: ``bad_message``: ``init: 'obs' holds 3e+38 at index (0,), beyond max_abs_observation=1e+06``.
    """
    if not spec.floating or _largest(values) <= limit:
        return values
    index = tuple(int(i) for i in np.argwhere(np.abs(values) > limit)[0])
    value, at = str(values[index]), f" at index {index}" if values.ndim else ""
    raise ProtocolError(BAD_MESSAGE, f"{where} {spec.name!r} holds {value}{at}, beyond {setting}={limit:g}")


def _largest(values: np.ndarray) -> float:
    """The largest magnitude in a float array (0.0 when it is empty)."""
    if values.size <= _SMALL:
        return max(map(abs, values.ravel().tolist()), default=0.0)
    return float(np.abs(values).max())
