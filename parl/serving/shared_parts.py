"""Parts of models shared by several ComputationTasks (an RL task and an auxiliary task on one trunk).

    linked = share_parts(tasks, {"trunk": {"RL": "model.actor_hidden", "Aux": "model.trunk"}})

Every task is built on its own; each group's first part then replaces the
others', and the tasks a group links share one weights lock and one learn lock
(see :meth:`ComputationTask.share_locks_with`). :class:`~parl.Manager` calls
this with its ``shared`` argument.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Tuple, Union

from parl.core.model import Model, _collect, named_models
from parl.layers.layer_func import LayerFunc
from parl.serving.computation_task import ComputationTask
from parl.serving.transforms import InputNormalizer

#: ``shared`` of :class:`~parl.Manager`: group name -> {task name: path of the shared part in that task}.
SharedParts = Mapping[str, Mapping[str, str]]

#: The path that names a task's input normalizer (running mean and std) in ``shared``.
NORMALIZER_PATH = "normalizer"


def share_parts(tasks: Mapping[str, ComputationTask], shared: SharedParts) -> List[List[str]]:
    """Put each group's first part in place of the others' and give linked tasks one set of locks.

    Must run before any task predicts or learns: parameters are made on a layer's
    first call, and an optimizer on a task's first update. Returns the names of
    the tasks linked by the groups, one list per linked set, in task order.

    Raises:
        ValueError: a malformed group, an unknown task or path, or parts of different structure,
            naming ``shared.<group>.<task>``.
    """
    if not isinstance(shared, Mapping):
        raise ValueError(f"shared: expected a mapping of group names to {{task: path}}, got {shared!r}")
    links: Dict[str, str] = {name: name for name in tasks}  # union-find over task names

    def root(name: str) -> str:
        while links[name] != name:
            name = links[name]
        return name

    for group, members in shared.items():
        where = f"shared.{group}"
        if not isinstance(members, Mapping) or len(members) < 2:
            raise ValueError(f"{where}: expected a mapping of at least two task names to paths, got {members!r}")
        for name, path in members.items():
            if name not in tasks:
                raise ValueError(f"{where}: unknown task {name!r}; tasks are {sorted(tasks)}")
            if not isinstance(path, str) or not path:
                raise ValueError(f"{where}.{name}: expected a path such as 'model.trunk' or 'normalizer', got {path!r}")
        (owner, owner_path), *others = members.items()
        part = _get_part(tasks[owner], owner_path, f"{where}.{owner}")
        for name, path in others:
            _set_part(tasks[name], path, part, f"{where}.{name}")
            links[root(name)] = root(owner)
    groups: Dict[str, List[str]] = {}
    for name in tasks:
        groups.setdefault(root(name), []).append(name)
    linked = [names for names in groups.values() if len(names) > 1]
    for names in linked:
        first = tasks[names[0]]
        for name in names[1:]:
            tasks[name].share_locks_with(first)
    return linked


Part = Union[LayerFunc, Model, list, tuple, dict, InputNormalizer]


def _get_part(task: ComputationTask, path: str, where: str) -> Part:
    if path == NORMALIZER_PATH:
        if task.normalizer is None:
            raise ValueError(f"{where}: task {task.name!r} does not normalize inputs; set normalize_inputs to share it")
        return task.normalizer
    parent, key = _parent(task, path, where)
    return _child(parent, key, path, where)


def _set_part(task: ComputationTask, path: str, part: Part, where: str) -> None:
    if path == NORMALIZER_PATH:
        if not isinstance(part, InputNormalizer):
            raise ValueError(
                f"{where}: 'normalizer' can only be replaced by another task's normalizer, got a model part"
            )
        mine = _get_part(task, path, where)
        assert isinstance(mine, InputNormalizer)  # what NORMALIZER_PATH names
        theirs = {n: s.mean.shape for n, s in part.stats.items()}
        ours = {n: s.mean.shape for n, s in mine.stats.items()}
        if theirs != ours:
            raise ValueError(f"{where}: normalizes inputs {ours}, the shared normalizer {theirs}")
        task.normalizer = part
        return
    if isinstance(part, InputNormalizer):
        raise ValueError(f"{where}: a normalizer can only replace a normalizer (path 'normalizer'), got {path!r}")
    parent, key = _parent(task, path, where)
    old = _child(parent, key, path, where)
    if _structure(old) != _structure(part):
        raise ValueError(f"{where}: layers {_structure(old)} differ from the shared part's {_structure(part)}")
    if isinstance(parent, tuple):
        raise ValueError(f"{where}: {path!r} is an item of a tuple, which cannot be replaced; use a list")
    if isinstance(parent, list):
        parent[int(key)] = part
    elif isinstance(parent, dict):
        parent[key] = part
    else:
        setattr(parent, str(key), part)


def _parent(task: ComputationTask, path: str, where: str) -> Tuple[object, Union[str, int]]:
    """The object holding the last element of ``path`` and that element's key."""
    first, *rest = path.split(".")
    models = dict(named_models(task.algorithm))
    if first not in models or not rest:
        raise ValueError(
            f"{where}: expected 'normalizer' or '<model>.<attribute path>' with <model> one of "
            f"{sorted(models)}, got {path!r}"
        )
    obj: object = models[first]
    for key in rest[:-1]:
        obj = _child(obj, key, path, where)
    last = rest[-1]
    return obj, int(last) if isinstance(obj, (list, tuple)) and last.isdigit() else last


def _child(obj: object, key: Union[str, int], path: str, where: str) -> Part:
    if isinstance(obj, (list, tuple)):
        index = int(key) if isinstance(key, int) or key.isdigit() else -1
        if not 0 <= index < len(obj):
            raise ValueError(f"{where}: {path!r}: no item {key!r} in a list of {len(obj)}")
        value = obj[index]
    elif isinstance(obj, dict):
        if key not in obj:
            raise ValueError(f"{where}: {path!r}: no key {key!r}; keys are {sorted(obj)}")
        value = obj[key]
    elif isinstance(obj, Model):
        if key not in vars(obj):
            raise ValueError(f"{where}: {path!r}: {type(obj).__name__} has no attribute {key!r}")
        value = vars(obj)[key]
    else:
        raise ValueError(f"{where}: {path!r}: cannot look up {key!r} in a {type(obj).__name__}")
    if not _structure(value):
        raise ValueError(f"{where}: {path!r} holds no layers (got a {type(value).__name__})")
    return value


def _structure(part: object) -> List[Tuple[str, str]]:
    """(relative path, layer class) of every layer in ``part``: what two shared parts must agree on."""
    layers: List[Tuple[str, LayerFunc]] = []
    _collect(part, "", set(), layers)
    return [(path, type(layer).__name__) for path, layer in layers]
