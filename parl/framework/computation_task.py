"""ComputationTask: one Algorithm behind a numpy-in, numpy-out interface.

    task = ComputationTask("RL", algorithm)
    actions, next_states = task.predict({"obs": obs_batch}, {})
    costs = task.learn(batch)          # {"loss": 0.12, ...} as floats
    task.save("ckpt/RL.pdckpt"); task.load("ckpt/RL.pdckpt")

It owns the optimizer, the update counter and checkpoints, and is safe to
call from the wrapper's prediction and training threads at once: the
optimizer step (the only write to weights) and each prediction run under one
lock, so a prediction never sees half-updated weights, while the training
forward and backward passes overlap predictions.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import threading
from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np
import paddle
from paddle.base import core

from parl.framework.algorithm import Algorithm
from parl.framework.model import Model, named_models
from parl.framework.optimizer import Optimizer
from parl.framework.specs import Spec, normalize_specs, zeros
from parl.layers.layer_func import training_mode

ArrayDict = Dict[str, np.ndarray]

#: Fields of a training batch, each a dict of batched arrays except ``next_episode_end``.
BATCH_FIELDS = ("inputs", "next_inputs", "states", "next_states", "actions", "rewards", "next_episode_end")

_CHECKPOINT_VERSION = 1


class ComputationTask:
    """Wraps one Algorithm; numpy in, numpy out."""

    def __init__(self, name: str, algorithm: Algorithm) -> None:
        if not isinstance(algorithm, Algorithm):
            raise ValueError(f"task {name!r}: expected a parl.Algorithm, got {type(algorithm).__name__}")
        self.name = name
        self.algorithm = algorithm
        model = algorithm.model
        owner = f"{type(model).__name__} (task {name!r})"
        self.input_specs: List[Spec] = normalize_specs(model.get_input_specs(), owner)
        self.state_specs: List[Spec] = normalize_specs(model.get_state_specs(), owner)
        self.action_specs: List[Spec] = normalize_specs(model.get_action_specs(), owner)
        self.reward_specs: List[Spec] = normalize_specs(model.get_reward_specs(), owner)
        self.update_steps = 0
        self._optimizer: Optional[Optimizer] = None
        self._pending_optimizer_state: Optional[dict] = None
        self._weights_lock = threading.Lock()
        self._learn_lock = threading.Lock()

    # -- prediction ---------------------------------------------------------
    def predict(
        self, inputs: Mapping[str, np.ndarray], states: Mapping[str, np.ndarray]
    ) -> Tuple[ArrayDict, ArrayDict]:
        """Batched actions and next states as numpy, keyed by spec name."""
        in_t = {k: _tensor(v) for k, v in inputs.items()}
        st_t = {k: _tensor(v) for k, v in states.items()}
        with self._weights_lock, paddle.no_grad(), training_mode(False):
            actions, next_states = self.algorithm.predict(in_t, st_t)
            return _to_numpy(actions), _to_numpy(next_states)

    def initial_states(self, batch_size: int = 1) -> ArrayDict:
        """Zero recurrent states, shaped by the model's state specs."""
        return zeros(self.state_specs, batch_size)

    # -- training -----------------------------------------------------------
    def learn(self, batch: Mapping[str, object]) -> Dict[str, float]:
        """One optimizer step on ``batch`` (fields :data:`BATCH_FIELDS`); returns the named costs."""
        t = {
            field: _tensor(batch[field])
            if field == "next_episode_end"
            else {k: _tensor(v) for k, v in batch[field].items()}
            for field in BATCH_FIELDS
        }
        with self._learn_lock, training_mode(True):
            costs = self.algorithm.learn(
                t["inputs"],
                t["next_inputs"],
                t["states"],
                t["next_states"],
                t["next_episode_end"],
                t["actions"],
                t["rewards"],
            )
            if "loss" not in costs:
                raise ValueError(
                    f"{type(self.algorithm).__name__}.learn must return a dict with a 'loss' entry, got {sorted(costs)}"
                )
            optimizer = self._get_optimizer()
            try:
                costs["loss"].backward()
                with self._weights_lock:
                    optimizer.step()
                    self.update_steps += 1
                    self.algorithm.after_update(self.update_steps)
            finally:
                # Also after a failure, so a bad batch leaves no gradient behind for the next one.
                optimizer.clear_grad(set_to_zero=False)
            return {k: float(v) for k, v in costs.items()}

    def _get_optimizer(self) -> Optimizer:
        # Layers create their parameters on first call, so the optimizer is made
        # after the first training forward pass has built everything it updates.
        if self._optimizer is None:
            params = self.algorithm.parameters()
            if not params:
                raise ValueError(f"task {self.name!r}: the algorithm has no trainable parameters")
            self._optimizer = self.algorithm.make_optimizer(params)
            if self._pending_optimizer_state is not None:
                self._optimizer.set_state_dict(self._from_structural(self._pending_optimizer_state))
                self._pending_optimizer_state = None
        return self._optimizer

    # -- checkpoints --------------------------------------------------------
    def save(self, path: str) -> None:
        """Write weights, optimizer state and counters to one file, atomically."""
        with self._learn_lock, self._weights_lock:
            state = {
                "version": _CHECKPOINT_VERSION,
                "task": self.name,
                "weights": self._algorithm_weights(),
                "optimizer": self._to_structural(self._optimizer.state_dict()) if self._optimizer else None,
                "update_steps": self.update_steps,
            }
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise

    def load(self, path: str) -> None:
        """Restore a file written by :meth:`save` (in this or another process)."""
        with open(path, "rb") as f:
            state = pickle.load(f)
        if not isinstance(state, dict) or state.get("version") != _CHECKPOINT_VERSION:
            raise ValueError(f"{path} is not a parl checkpoint (version {_CHECKPOINT_VERSION})")
        with self._learn_lock, self._weights_lock:
            self._set_algorithm_weights(state["weights"])
            self.update_steps = int(state["update_steps"])
            if state["optimizer"] is not None:
                if self._optimizer is None:
                    self._pending_optimizer_state = state["optimizer"]
                else:
                    self._optimizer.set_state_dict(self._from_structural(state["optimizer"]))

    def algorithm_weights(self) -> Dict[str, ArrayDict]:
        """Weights of every Model the algorithm holds, by attribute name; a consistent snapshot
        even while the task trains."""
        with self._weights_lock:
            return self._algorithm_weights()

    def set_algorithm_weights(self, weights: Mapping[str, ArrayDict]) -> None:
        """Inverse of :meth:`algorithm_weights`; never interleaves with an update or a prediction."""
        with self._weights_lock:
            self._set_algorithm_weights(weights)

    def _algorithm_weights(self) -> Dict[str, ArrayDict]:
        return {attr: model.get_weights() for attr, model in self._models()}

    def _set_algorithm_weights(self, weights: Mapping[str, ArrayDict]) -> None:
        models = dict(self._models())
        if set(weights) != set(models):
            raise ValueError(
                f"task {self.name!r}: checkpoint holds models {sorted(weights)}, algorithm has {sorted(models)}"
            )
        for attr, model in models.items():
            model.set_weights(weights[attr])

    def _models(self) -> List[Tuple[str, Model]]:
        return named_models(self.algorithm)

    # Optimizer state is keyed by generated parameter names, which differ
    # between processes; checkpoints key it by model structure instead.
    def _param_names(self) -> List[Tuple[str, str]]:
        pairs = []
        for attr, model in self._models():
            for path, layer in model.named_layers():
                for suffix, param in layer.params.items():
                    pairs.append((param.name, f"{attr}/{path}.{suffix}"))
        return pairs

    def _to_structural(self, state: Mapping[str, object]) -> dict:
        return _rename(state, self._param_names())

    def _from_structural(self, state: Mapping[str, object]) -> dict:
        return _rename(state, [(b, a) for a, b in self._param_names()])


def _rename(state: Mapping[str, object], pairs: List[Tuple[str, str]]) -> dict:
    # Longest names first, so "fc_1.w" never claims the state of "fc_1.w_x".
    pairs = sorted(pairs, key=lambda p: -len(p[0]))
    return _rename_sorted(state, pairs)


def _rename_sorted(state: Mapping[str, object], pairs: List[Tuple[str, str]]) -> dict:
    out = {}
    for key, value in state.items():
        for old, new in pairs:
            if key == old or key.startswith(old + "_"):
                key = new + key[len(old) :]
                break
        if isinstance(value, paddle.Tensor):
            value = value.numpy()
        elif isinstance(value, dict):
            value = _rename_sorted(value, pairs)
        out[key] = value
    return out


def _tensor(array: np.ndarray) -> paddle.Tensor:
    # The eager Tensor constructor costs about half of paddle.to_tensor per call.
    return core.eager.Tensor(np.ascontiguousarray(array))


def _to_numpy(tensors: Mapping[str, paddle.Tensor]) -> ArrayDict:
    return {k: v.numpy() for k, v in tensors.items()}
