"""Model: a network built from LayerFuncs, with the specs of the data it consumes and produces.

    class MLPModel(parl.Model):
        def __init__(self, num_actions):
            super().__init__()
            self.fc1 = layers.fc(64, act="relu")
            self.out = layers.fc(num_actions)

        def get_input_specs(self):
            return [("obs", dict(shape=[4], dtype="float32"))]

        def get_action_specs(self):
            return [("action", dict(shape=[1], dtype="int64"))]

        def value(self, obs):
            return self.out(self.fc1(obs))

Layers are found by walking the model's attributes (LayerFuncs, nested Models,
lists, tuples and dicts of them) in definition order. That order, not the
globally unique parameter names, pairs the layers of two models, so a clone
made by the same ``model_func`` or a model restored in another process lines
up with the original.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Tuple

import numpy as np
import paddle

from parl.core.specs import SpecList
from parl.layers.layer_func import LayerFunc


class Model:
    """Base class of networks. Subclasses declare specs and the functions algorithms call.

    Not abstract: a model held inside another (an actor, a critic, a learned temperature) declares no
    specs, so none of its methods is required. The model a task is built on must declare
    :meth:`get_input_specs` and :meth:`get_action_specs`; without them
    :class:`~parl.serving.computation_task.ComputationTask` fails at construction, naming the method.
    """

    def __init__(self) -> None:
        pass

    # -- specs --------------------------------------------------------------
    def get_input_specs(self) -> SpecList:
        """Observations the model reads: ``[(name, dict(shape=[...], dtype=...)), ...]``."""
        raise NotImplementedError(f"{type(self).__name__} must implement get_input_specs()")

    def get_action_specs(self) -> SpecList:
        """Actions the model's algorithm outputs."""
        raise NotImplementedError(f"{type(self).__name__} must implement get_action_specs()")

    def get_state_specs(self) -> SpecList:
        """Recurrent memory carried between steps; none by default."""
        return []

    def get_reward_specs(self) -> SpecList:
        """Rewards; one float per step by default."""
        return [("reward", dict(shape=[1], dtype="float32"))]

    # -- structure ----------------------------------------------------------
    def named_layers(self) -> List[Tuple[str, LayerFunc]]:
        """``(attribute path, layer)`` for each distinct layer, in definition order."""
        out: List[Tuple[str, LayerFunc]] = []
        _collect(self, "", set(), out)
        return out

    def parameters(self) -> List[paddle.Tensor]:
        """Trainable parameters of every layer (layers must have been called or set)."""
        return [p for _, layer in self.named_layers() for p in layer.parameters()]

    def get_weights(self) -> Dict[str, np.ndarray]:
        """Every parameter and statistic as numpy, keyed ``<attribute path>.<suffix>``."""
        return {
            f"{path}.{suffix}": value
            for path, layer in self.named_layers()
            for suffix, value in layer.get_arrays().items()
        }

    def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
        """Set values from :meth:`get_weights` output (of this model or one of the same structure).

        Every key is checked before any value is set. A layer that has not
        been built yet is built from the values given for it (and may be left
        out, as :meth:`get_weights` leaves out unbuilt layers).

        Raises:
            ValueError: naming the key that is missing or unknown, or whose shape differs.
        """
        owner = f"{type(self).__name__}.set_weights"
        layers = dict(self.named_layers())
        by_layer: Dict[str, Dict[str, np.ndarray]] = {}
        for key, value in weights.items():
            path, _, suffix = key.rpartition(".")
            if path not in layers:
                raise ValueError(f"{owner}: unknown key {key!r}; layers are {sorted(layers)}")
            by_layer.setdefault(path, {})[suffix] = np.asarray(value)
        for path, layer in layers.items():
            if not layer.params:
                continue
            given = by_layer.get(path, {})
            missing = [f"{path}.{s}" for s in layer.params if s not in given]
            if missing:
                raise ValueError(f"{owner}: no values for {missing}")
            unknown = [f"{path}.{s}" for s in given if s not in layer.params]
            if unknown:
                raise ValueError(f"{owner}: unknown keys {unknown}; layer {path!r} has {sorted(layer.params)}")
            for suffix, value in given.items():
                expected = list(layer.params[suffix].shape)
                if list(value.shape) != expected:
                    raise ValueError(f"{owner}: {path}.{suffix}: expected shape {expected}, got {list(value.shape)}")
        for path, values in by_layer.items():
            layers[path].set_arrays(values)

    def sync_weights_to(self, target: "Model", decay: float = 0.0) -> None:
        """Copy this model's values into ``target``: ``target = decay * target + (1 - decay) * self``.

        ``decay=0`` is a hard copy; ``0 < decay < 1`` a Polyak average. Layers
        are paired by structure, not by name.

        Raises:
            ValueError: ``decay`` is outside [0, 1) or the structures differ.
        """
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {decay!r}")
        mine, theirs = self.named_layers(), target.named_layers()
        if [p for p, _ in mine] != [p for p, _ in theirs]:
            raise ValueError(
                f"cannot sync {type(self).__name__} to {type(target).__name__}: layer paths differ "
                f"({[p for p, _ in mine]} vs {[p for p, _ in theirs]})"
            )
        for (_, src), (_, dst) in zip(mine, theirs):
            if src is not dst:
                dst.assign_from(src, decay)


def _collect(obj: object, prefix: str, seen: set, out: List[Tuple[str, LayerFunc]]) -> None:
    if isinstance(obj, LayerFunc):
        if id(obj) not in seen:
            seen.add(id(obj))
            out.append((prefix.rstrip("."), obj))
    elif isinstance(obj, Model):
        for key, value in vars(obj).items():
            _collect(value, f"{prefix}{key}.", seen, out)
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            _collect(value, f"{prefix}{i}.", seen, out)
    elif isinstance(obj, dict):
        for key, value in obj.items():
            _collect(value, f"{prefix}{key}.", seen, out)


def named_models(obj: object) -> List[Tuple[str, Model]]:
    """``(attribute name, model)`` for each Model held directly as an attribute of ``obj``
    (an algorithm's online, target and other models)."""
    return [(name, value) for name, value in vars(obj).items() if isinstance(value, Model)]
