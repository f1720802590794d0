"""Dict observations for the tests: a two-input Q model (a uint8 ``image`` and a float32 ``vec``), an
environment whose observations are ``Dict(image=Box(0, 255, (7, 7, 1), uint8), vec=Box(-1, 1, (3,)))``,
and an agent that feeds each key of its observations to the model's input of that name."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

import gymnasium
import numpy as np
import paddle

import parl
from parl import layers
from parl.core.specs import SpecList

IMAGE_SHAPE = (7, 7, 1)
VEC_SHAPE = (3,)
NUM_ACTIONS = 3


def dict_space() -> gymnasium.spaces.Dict:
    """``Dict(image=Box(0, 255, (7, 7, 1), uint8), vec=Box(-1, 1, (3,), float32))``."""
    return gymnasium.spaces.Dict(
        image=gymnasium.spaces.Box(0, 255, IMAGE_SHAPE, np.uint8),
        vec=gymnasium.spaces.Box(-1.0, 1.0, VEC_SHAPE, np.float32),
    )


class TwoInputQModel(parl.Model):
    """``value({"image": [B, 7, 7, 1] uint8, "vec": [B, 3] float32}) -> [B, num_actions]``: the image
    scaled to [0, 1] and flattened, joined with the vector, then two fc layers."""

    def __init__(self, num_actions: int = NUM_ACTIONS, hidden_size: int = 16) -> None:
        super().__init__()
        self.num_actions = num_actions
        self.hidden = layers.fc(hidden_size, act="relu")
        self.q = layers.fc(num_actions)

    def get_input_specs(self) -> SpecList:
        return [
            ("image", dict(shape=list(IMAGE_SHAPE), dtype="uint8")),
            ("vec", dict(shape=list(VEC_SHAPE), dtype="float32")),
        ]

    def get_action_specs(self) -> SpecList:
        return [("action", dict(shape=[1], dtype="int64", range=[0, self.num_actions]))]

    def value(self, inputs: Mapping[str, paddle.Tensor]) -> paddle.Tensor:
        """Q-values of every action, ``[B, num_actions]``."""
        image = paddle.flatten(paddle.cast(inputs["image"], "float32") / 255.0, start_axis=1)
        return self.q(self.hidden(paddle.concat([image, inputs["vec"]], axis=1)))


def dict_obs(rng: np.random.Generator, batch: Optional[int] = None) -> Dict[str, np.ndarray]:
    """A random observation of :func:`dict_space` (with a batch axis of ``batch`` when given)."""
    front = () if batch is None else (batch,)
    return {
        "image": rng.integers(0, 256, front + IMAGE_SHAPE, dtype=np.uint8),
        "vec": rng.uniform(-1, 1, front + VEC_SHAPE).astype(np.float32),
    }


class DictEnv(gymnasium.Env):
    """Episodes of ``length`` steps of random Dict observations; reward 1.0 when the action is the
    index of the largest of ``vec``'s values, else 0.0."""

    def __init__(self, length: int = 5) -> None:
        self.observation_space = dict_space()
        self.action_space = gymnasium.spaces.Discrete(NUM_ACTIONS)
        self.length = length
        self._rng = np.random.default_rng(0)
        self._obs: Dict[str, np.ndarray] = {}
        self._steps = 0

    def reset(
        self, *, seed: Optional[int] = None, options: Optional[dict] = None
    ) -> Tuple[Dict[str, np.ndarray], Dict[str, Any]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._steps = 0
        self._obs = dict_obs(self._rng)
        return self._obs, {}

    def step(self, action: Any) -> Tuple[Dict[str, np.ndarray], float, bool, bool, Dict[str, Any]]:
        reward = float(int(action) == int(np.argmax(self._obs["vec"])))
        self._steps += 1
        self._obs = dict_obs(self._rng)
        return self._obs, reward, False, self._steps >= self.length, {}


class DictAgent(parl.Agent):
    """Plays episodes of an environment of Dict observations through the helper of ``"T"``: each key of an
    observation is the model's input of that name. Keeps every observation it was given (``seen``)."""

    def __init__(self, env: Any, *, seed: int = 0, num_games: Optional[int] = None) -> None:
        super().__init__(env, seed=seed, num_games=num_games)
        self.seen: list = []

    def run_one_episode(self) -> Dict[str, float]:
        helper = self.helpers["T"]
        obs, _ = self.reset_env()
        states = helper.initial_states()
        total, steps, done = 0.0, 0, False
        while not done:
            self.seen.append(obs)
            inputs = dict(obs)
            actions, next_states = helper.predict(inputs, states)
            obs, reward, terminated, truncated, _ = self.env.step(int(actions["action"][0]))
            helper.store_data(inputs, actions, reward, dict(obs), terminated, truncated, states, next_states)
            helper.learn()
            states = next_states
            total += float(reward)
            steps += 1
            done = terminated or truncated
        return {"reward": total, "steps": steps}
