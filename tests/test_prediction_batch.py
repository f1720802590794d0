"""One definition of a prediction batch (parl/serving/prediction_batch.py), and its accelerators held to it.

The same requests go through the plain definition (``stack_samples``, ``split_replies``), the
cooperative placement's Python fast path (``batching._joined``, ``_gather``, ``_stage``) and its C
extension (``join``, ``hand_out``); the batches and the replies must be the same, bit for bit, or an
accelerator must decline (None) and leave the batch to the definition. Ragged and unusual samples
included.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pytest

from parl.core.specs import Spec, check_dict
from parl.core.task_specs import TaskSpecs
from parl.runtime.cooperative import batching
from parl.serving.prediction_batch import BatchLayout, check_rows, split_replies, stack_samples

EXT = batching.EXTENSION
ArrayDict = Dict[str, np.ndarray]


def task_specs(inputs: Sequence[Spec], states: Sequence[Spec] = ()) -> TaskSpecs:
    return TaskSpecs(list(inputs), list(states), [Spec("action", [1], "int64")], [Spec("reward", [1], "float32")])


def parked(samples: Sequence[Tuple[object, Optional[object]]]) -> List[object]:
    """Parked requests holding ``samples`` ((inputs, states) each): the extension's request type when
    it is built (the C join reads only those), else plain objects with the same fields."""
    requests = []
    for inputs, states in samples:
        request = EXT.Parking() if EXT is not None else SimpleNamespace()
        request._inputs, request._states = inputs, states
        request._parked_at = request._resumed_at = 0.0
        requests.append(request)
    return requests


def queue_of(specs: TaskSpecs) -> batching.PredictionQueue:
    task = SimpleNamespace(name="T", specs=specs)
    return batching.PredictionQueue(task, max_batchsize=1024, predict_batch=None, prediction_error=None)


def assert_same_arrays(got: ArrayDict, expected: ArrayDict) -> None:
    assert list(got) == list(expected)
    for name, value in expected.items():
        assert type(got[name]) is np.ndarray
        assert got[name].dtype == value.dtype and got[name].shape == value.shape, name
        assert got[name].tobytes() == value.tobytes(), name


def definition(specs: TaskSpecs, samples: Sequence[Tuple[object, Optional[object]]]) -> Tuple[ArrayDict, ArrayDict]:
    """The batch the definition makes of ``samples`` once each is checked (and converted) at the door."""
    checked = [
        (check_dict(specs.inputs, inputs, "input"), check_dict(specs.states, states or {}, "state"))
        for inputs, states in samples
    ]
    return stack_samples(BatchLayout(specs), [i for i, _ in checked], [s for _, s in checked])


def accelerators() -> List[Tuple[str, Optional[object]]]:
    """(name, join) of every accelerator of the one-input join: the Python fast path, and the C one."""
    out: List[Tuple[str, Optional[object]]] = [("python", None)]
    if EXT is not None:
        out.append(("c", EXT.join))
    return out


def assert_gathered_as_defined(specs: TaskSpecs, samples: Sequence[Tuple[object, Optional[object]]]) -> None:
    """Every path of the cooperative scheduler (checks included) gathers ``samples`` into the batch the
    definition makes of them, keeping every request."""
    expected = definition(specs, samples)
    for name, join in accelerators():
        batch = parked(samples)
        gathered, inputs, states = batching._gather(queue_of(specs), batch, join)
        assert gathered == batch, name
        assert_same_arrays(inputs, expected[0])
        assert_same_arrays(states, expected[1])


# -- stacking ----------------------------------------------------------------------------------

ONE_INPUT_CASES = [
    (Spec("obs", [4], "float32"), 1),
    (Spec("obs", [4], "float32"), 7),
    (Spec("obs", [2, 3], "float32"), 5),
    (Spec("obs", [1], "float64"), 3),
    (Spec("obs", [3], "int64"), 4),
    (Spec("pixels", [2, 4, 4], "uint8"), 6),
    (Spec("obs", [5], "float32"), 256),
]


@pytest.mark.parametrize("spec, n", ONE_INPUT_CASES, ids=lambda v: str(v) if isinstance(v, int) else v.name)
def test_exact_samples_stack_alike_on_every_path(spec: Spec, n: int) -> None:
    rng = np.random.default_rng(n)
    samples = [({spec.name: (rng.random(spec.shape) * 100).astype(spec.dtype)}, None) for _ in range(n)]
    specs = task_specs([spec])
    expected = definition(specs, samples)
    assert_same_arrays(expected[0], {spec.name: np.stack([inputs[spec.name] for inputs, _ in samples])})
    assert expected[1] == {}
    layout = BatchLayout(specs)
    for name, join in accelerators():
        joined = batching._joined(layout, parked(samples), join)
        assert joined is not None, name
        assert_same_arrays(joined[0], expected[0])
        assert joined[1] == {}
    assert_gathered_as_defined(specs, samples)


F32 = Spec("obs", [2], "float32")
GOOD = {"obs": np.array([1.5, -2.0], np.float32)}


class _Sub(np.ndarray):
    pass


# Samples that do not fit the spec exactly but that the full check converts: an accelerator leaves them
# to the check, or joins them into the very batch the definition makes of the converted samples.
CONVERTIBLE = {
    "float64": ({"obs": np.array([0.25, 3.0])}, None),
    "strided": ({"obs": np.arange(4, dtype=np.float32)[::2]}, None),
    "subclass": ({"obs": np.array([7.0, 8.0], np.float32).view(_Sub)}, None),
    "list": ({"obs": [0.5, 0.75]}, None),
    "int-values": ({"obs": np.array([3, 4], np.int32)}, None),
    "empty-states": (GOOD, {}),
}
# Samples no path may stack with the others: another shape (ragged), or another name.
REFUSED = {
    "ragged-longer": ({"obs": np.zeros(3, np.float32)}, None),
    "ragged-shorter": ({"obs": np.zeros(1, np.float32)}, None),
    "ragged-rank": ({"obs": np.zeros((1, 2), np.float32)}, None),
    "extra-name": ({"obs": np.zeros(2, np.float32), "more": np.zeros(2, np.float32)}, None),
    "renamed": ({"observation": np.zeros(2, np.float32)}, None),
}


@pytest.mark.parametrize("case", sorted(CONVERTIBLE))
def test_an_unusual_sample_makes_the_definitions_batch_on_every_path(case: str) -> None:
    samples = [(GOOD, None), CONVERTIBLE[case], (GOOD, None)]
    specs = task_specs([F32])
    layout = BatchLayout(specs)
    expected = definition(specs, samples)
    for _, join in accelerators():  # declined, or (an empty states dict, in Python) the same batch
        joined = batching._joined(layout, parked(samples), join)
        if joined is not None:
            assert_same_arrays(joined[0], expected[0])
            assert joined[1] == {}
    assert_gathered_as_defined(specs, samples)


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_ragged_or_misnamed_sample_is_never_joined(case: str) -> None:
    samples = [(GOOD, None), REFUSED[case], (GOOD, None)]
    layout = BatchLayout(task_specs([F32]))
    for name, join in accelerators():
        assert batching._joined(layout, parked(samples), join) is None, name
        assert batching._joined(layout, parked(samples[1:]), join) is None, name
    with pytest.raises(ValueError):
        check_dict(layout.specs.inputs, REFUSED[case][0], "input")  # the full check refuses it


def test_several_specs_and_states_stack_by_spec_in_spec_order() -> None:
    specs = task_specs(
        [Spec("image", [2, 2], "uint8"), Spec("obs", [3], "float32")],
        [Spec("h", [4], "float32"), Spec("step", [1], "int64")],
    )
    rng = np.random.default_rng(0)
    samples = [
        (
            {"obs": rng.random(3).astype(np.float32), "image": rng.integers(0, 255, (2, 2)).astype(np.uint8)},
            {"step": np.array([i], np.int64), "h": rng.random(4).astype(np.float32)},
        )
        for i in range(5)
    ]
    layout = BatchLayout(specs)
    assert layout.one_input is None
    expected = definition(specs, samples)
    assert list(expected[0]) == ["image", "obs"] and list(expected[1]) == ["h", "step"]
    for field, specs_of in ((0, specs.inputs), (1, specs.states)):
        for spec in specs_of:
            np.testing.assert_array_equal(expected[field][spec.name], np.stack([s[field][spec.name] for s in samples]))
    for name, join in accelerators():
        assert batching._joined(layout, parked(samples), join) is None, name
    assert_gathered_as_defined(specs, samples)


def test_an_empty_batch_stacks_to_nothing() -> None:
    layout = BatchLayout(task_specs([F32], [Spec("h", [2], "float32")]))
    assert stack_samples(layout, [], []) == ({}, {})
    assert batching._stacked(layout, []) == ({}, {})


def test_a_non_finite_value_is_joined_alike_and_found_on_the_joined_batch() -> None:
    layout = BatchLayout(task_specs([F32]))
    assert layout.all_finite(*stack_samples(layout, [GOOD, GOOD], []))
    samples = [(GOOD, None), ({"obs": np.array([np.nan, 1.0], np.float32)}, None)]
    expected = stack_samples(layout, [inputs for inputs, _ in samples], [])
    assert not layout.all_finite(*expected)  # what sends every sample of the batch to the full check
    for name, join in accelerators():
        joined = batching._joined(layout, parked(samples), join)
        assert joined is not None, name
        assert_same_arrays(joined[0], expected[0])


# -- replies -----------------------------------------------------------------------------------

REPLY_CASES = {
    "one-int-action": (lambda n: {"action": np.arange(n, dtype=np.int64).reshape(n, 1)}, lambda n: {}),
    "one-flat-action": (lambda n: {"action": np.arange(n, dtype=np.float32)}, lambda n: {}),
    "one-2d-action": (lambda n: {"action": np.arange(n * 6, dtype=np.float64).reshape(n, 2, 3)}, lambda n: {}),
    "two-actions": (
        lambda n: {"move": np.arange(n * 2, dtype=np.float32).reshape(n, 2), "fire": np.arange(n) % 2 == 0},
        lambda n: {},
    ),
    "with-states": (
        lambda n: {"action": np.arange(n, dtype=np.int64).reshape(n, 1)},
        lambda n: {"h": np.arange(n * 4, dtype=np.float32).reshape(n, 4), "c": np.ones((n, 4), np.float32)},
    ),
    "no-outputs": (lambda n: {}, lambda n: {}),
}


@pytest.mark.parametrize("n", [1, 3, 64])
@pytest.mark.parametrize("case", sorted(REPLY_CASES))
def test_replies_are_the_same_rows_on_every_path(case: str, n: int) -> None:
    make_actions, make_states = REPLY_CASES[case]
    actions, next_states = make_actions(n), make_states(n)
    expected = split_replies(actions, next_states, n)
    assert len(expected) == n
    for i, (action_row, state_row) in enumerate(expected):
        assert list(action_row) == list(actions) and list(state_row) == list(next_states)
        for got, batch in ((action_row, actions), (state_row, next_states)):
            for name, values in batch.items():
                np.testing.assert_array_equal(got[name], values[i])
                assert type(got[name]) is type(values[i])
                if values.ndim > 1:
                    assert np.shares_memory(got[name], values)  # a view, no copy
    assert len({id(row) for _, row in expected}) == n  # a dict of its own per request
    hand_outs: List[Optional[object]] = [None] + ([EXT.hand_out] if EXT is not None else [])
    for hand_out in hand_outs:
        batch = parked([({}, None)] * n)
        for i, request in enumerate(batch):
            request._parked_at = float(i)
        ready: list = []
        parked_sum = batching._stage(batch, actions, next_states, ready, hand_out)
        assert parked_sum == sum(float(i) for i in range(n))
        assert [request for request, _ in ready] == batch[::-1]  # resumed from the end
        for (_, (action_row, state_row)), (exp_actions, exp_states) in zip(ready[::-1], expected):
            for got, want in ((action_row, exp_actions), (state_row, exp_states)):
                assert list(got) == list(want)
                for name in want:
                    assert type(got[name]) is type(want[name])
                    np.testing.assert_array_equal(got[name], want[name])
                    assert np.asarray(got[name]).tobytes() == np.asarray(want[name]).tobytes()


@pytest.mark.parametrize("rows, n", [(2, 3), (4, 3), (0, 1)])
def test_another_number_of_rows_is_refused_alike_on_every_path(rows: int, n: int) -> None:
    actions = {"action": np.zeros((rows, 1), np.int64)}
    message = f"the task answered {rows} rows of 'action' for a batch of {n}"
    with pytest.raises(ValueError, match=message):
        check_rows(actions, {}, n)
    with pytest.raises(ValueError, match=message):
        split_replies(actions, {}, n)
    hand_outs: List[Optional[object]] = [None] + ([EXT.hand_out] if EXT is not None else [])
    for hand_out in hand_outs:
        ready: list = []
        with pytest.raises(ValueError, match=message):
            batching._stage(parked([({}, None)] * n), actions, {}, ready, hand_out)
        assert ready == []
    with pytest.raises(ValueError, match=r"the task answered 2 rows of 'h' for a batch of 3"):
        split_replies({"action": np.zeros((3, 1))}, {"h": np.zeros((2, 4))}, 3)
