"""The package layout keeps its promises: imports point downward only, no two files import each
other, directly or around a circle, and nothing above the runtime names a placement.

Ranks, top to bottom (a module may import its own folder and any folder ranked below it):

    experiment, utils, multiagent,     the user-facing top
    testing
    compat                             what old names need besides a new path (0.1's train_agents, ...)
    parl/__init__
    algorithms                         math per algorithm
    models                             ready-made models
    runtime                            where agents run
    serving                            batching requests into calls of a task
    experience                         what helpers keep
    core                               the vocabulary
    layers                             LayerFunc, distributions, optimizers
    rlx                                the RLX protocol and its Python client (beside layers): leaves only
    leaf modules                       validation, affinity, core_claims, threads, seeding, wire: import
                                       only the process settings below them
    process settings                   allocator, cpu_kernels, moved_names: import no parl module

parl/experiment is in rooms, each a folder of one job, importing its own room and the rooms below it
(EXPERIMENT_ROOMS): config (a config read, checked and built, and the settings types it embeds),
evaluation, train and policy, runs (several runs of a config), cli (the ``parl`` command).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

import pytest

from parl.runtime import registry

ROOT = Path(__file__).resolve().parents[1] / "parl"

TOP = 8
RANKS = {
    "experiment": 8,
    "utils": 8,
    "multiagent": 8,
    "testing": 8,
    "compat": 8,
    "__main__": 8,
    "": 8,  # parl/__init__.py
    "algorithms": 6,
    "models": 5,
    "runtime": 4,
    "serving": 3,
    "experience": 2,
    "core": 1,
    "layers": 0,
    "rlx": 0,
    "validation": -1,
    "affinity": -1,
    "core_claims": -1,
    "threads": -1,
    "seeding": -1,
    "wire": -1,
    "moved_names": -2,
    "allocator": -2,
    "cpu_kernels": -2,
}


def _modules() -> Dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = ("parl",) + path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(path: Path) -> Set[str]:
    """The parl modules ``path`` imports anywhere (top level or inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] == "parl":
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "parl")
    return {m for m in found if m in MODULES}


GRAPH = {name: _imports(path) - {name} for name, path in MODULES.items()}


def _folder(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


EXPERIMENT_ROOMS = {"config": 0, "evaluation": 1, "train": 2, "policy": 2, "runs": 3, "cli": 4}


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "experiment" else ""


def test_experiment_holds_rooms_only():
    loose = sorted(p.name for p in (ROOT / "experiment").glob("*.py") if p.name != "__init__.py")
    assert loose == [], f"modules outside a room of parl/experiment: {loose}"
    rooms = {p.name for p in (ROOT / "experiment").iterdir() if (p / "__init__.py").exists()}
    assert rooms == set(EXPERIMENT_ROOMS)


def room_upward_imports(graph: Dict[str, Set[str]], module: str) -> List[str]:
    """What an experiment module imports from another room of its rank or above."""
    room = _room(module)
    return sorted(
        d
        for d in graph[module]
        if _room(d) and _room(d) != room and EXPERIMENT_ROOMS[_room(d)] >= EXPERIMENT_ROOMS[room]
    )


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _room(m)))
def test_experiment_rooms_import_downward(module):
    assert room_upward_imports(GRAPH, module) == [], f"{module} imports rooms that are not below it"


def test_the_room_check_catches_an_upward_import():
    graph = {"parl.experiment.config.a": {"parl.experiment.train.b"}, "parl.experiment.train.b": set()}
    assert room_upward_imports(graph, "parl.experiment.config.a") == ["parl.experiment.train.b"]
    assert room_upward_imports(graph, "parl.experiment.train.b") == []


def test_every_module_has_a_rank():
    assert {_folder(m) for m in MODULES} <= set(RANKS), sorted({_folder(m) for m in MODULES} - set(RANKS))


def test_the_old_flat_framework_folder_is_gone():
    assert not (ROOT / "framework").exists()


def upward_imports(graph: Dict[str, Set[str]], module: str) -> List[str]:
    """What ``module`` imports from its own rank or above, outside its folder (``parl/__init__``
    counts as the top; the top imports freely)."""
    rank = RANKS[_folder(module)]
    if rank == TOP:  # the user-facing modules use each other freely
        return []
    return sorted(d for d in graph[module] if _folder(d) != _folder(module) and RANKS[_folder(d)] >= rank)


def find_cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Import circles of ``graph`` (one per back edge a depth-first walk meets)."""
    cycles: List[List[str]] = []
    state: Dict[str, int] = {}  # 1: on the path, 2: done
    path: List[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for dep in sorted(graph.get(module, ())):
            if state.get(dep) == 1:
                cycles.append(path[path.index(dep) :] + [dep])
            elif dep not in state:
                visit(dep)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return cycles


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_downward(module):
    assert upward_imports(GRAPH, module) == [], f"{module} imports modules that are not below it"


def test_lower_folders_never_import_algorithms_models_or_experiment():
    lower = ("core", "runtime", "serving", "experience", "layers")
    offenders = {
        m: sorted(d for d in GRAPH[m] if _folder(d) in ("algorithms", "models", "experiment", "utils"))
        for m in MODULES
        if _folder(m) in lower
    }
    assert {m: deps for m, deps in offenders.items() if deps} == {}


def test_no_import_circles():
    assert find_cycles(GRAPH) == []


def test_the_checks_catch_a_circle_and_an_upward_import():
    graph = {
        "parl.core.a": {"parl.serving.b"},
        "parl.serving.b": {"parl.core.a", "parl.core.c"},
        "parl.core.c": set(),
    }
    assert upward_imports(graph, "parl.core.a") == ["parl.serving.b"]
    assert upward_imports(graph, "parl.serving.b") == []
    assert find_cycles(graph) == [["parl.core.a", "parl.serving.b", "parl.core.a"]]
    assert find_cycles({"parl.core.a": {"parl.core.c"}, "parl.core.c": set()}) == []


#: The built-in placements' folders (each registers itself in its ``placement`` module).
PLACEMENT_PACKAGES = tuple(module.rsplit(".", 1)[0] for module in registry.BUILT_IN)
#: String literals of ``parl/experiment`` that equal a placement's name but name something else: module -> words.
NOT_PLACEMENTS = {
    "parl.experiment.runs.tune": {
        "ray"
    },  # the Ray library (sys.modules) and Ray Tune's folder: parl tune runs on Ray Tune
    "parl.experiment.runs.tune_log": {"ray"},  # Ray's logger
}


def placement_mentions(module: str, source: str, imports: Set[str]) -> List[str]:
    """Where ``module`` (of ``source``, importing ``imports``) names a placement: an import of a module of a
    placement's folder, or a string literal equal to a placement's name (but for :data:`NOT_PLACEMENTS`)."""
    found = [
        f"imports {dep}"
        for dep in sorted(imports)
        if any(dep == p or dep.startswith(p + ".") for p in PLACEMENT_PACKAGES)
    ]
    names = set(registry.names()) - NOT_PLACEMENTS.get(module, set())
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
            found.append(f"line {node.lineno}: {node.value!r}")
    return found


def test_the_experiment_package_never_names_a_placement():
    """It asks the registry entry what it needs (the options of a config's placement block, where evaluation
    runs, what a sweep reserves...), so that a placement is one folder and one registry entry."""
    experiment = [m for m in MODULES if _folder(m) == "experiment"]
    mentions = {m: placement_mentions(m, MODULES[m].read_text(encoding="utf-8"), GRAPH[m]) for m in experiment}
    assert {m: found for m, found in mentions.items() if found} == {}


def test_the_placement_check_catches_an_import_and_a_name():
    source = 'from parl.runtime.ray.options import RayOptions\nif placement == "processes":\n    pass\n'
    found = placement_mentions("parl.experiment.x", source, {"parl.runtime.ray.options", "parl.runtime.manager"})
    assert found == ["imports parl.runtime.ray.options", "line 2: 'processes'"]
    assert placement_mentions("parl.experiment.runs.tune", 'TUNE_FOLDER = "ray"', set()) == []
