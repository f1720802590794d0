"""The C extension parl.runtime.cooperative._cooperative: each piece against its Python twin in batching.py.

The Manager-level behaviours run on both paths in tests/test_placement_contract.py and
tests/test_cooperative.py; here each function is checked on its own: what it answers, what it leaves
to the Python path (None), and what it refuses.
"""

from __future__ import annotations

import inspect
from time import perf_counter
from typing import List

import gymnasium as gym
import numpy as np
import pytest
from greenlet import getcurrent, greenlet

import parl
from parl.core.agent_helper import _states_optional
from parl.runtime.cooperative import batching
from parl.runtime.cooperative import runner as cooperative

from toys import IdleAgent

EXT = cooperative.EXTENSION
F32 = np.dtype(np.float32)


def test_the_extension_is_built_and_can_be_turned_off(monkeypatch) -> None:
    assert EXT is not None, "parl.runtime.cooperative._cooperative was not built (or PARL_NO_EXTENSION is set)"
    monkeypatch.setenv("PARL_NO_EXTENSION", "1")
    assert batching._load_extension() is None
    monkeypatch.setenv("PARL_NO_EXTENSION", "0")
    assert batching._load_extension() is EXT


def test_a_helper_is_bound_to_the_c_predict() -> None:
    manager = parl.Manager({"RL": parl.TaskSettings(_algorithm_func)}, placement="cooperative")
    helper = parl.OnPolicyHelper()
    manager.add_agent(IdleAgent(gym.make("CartPole-v1")), {"RL": helper})
    assert type(helper._comm).predict is EXT.Parking.predict
    assert helper.predict == helper._comm.predict
    assert _states_optional(EXT.Parking.predict)
    assert list(inspect.signature(EXT.Parking.predict).parameters) == ["self", "inputs", "states"]


def _algorithm_func():
    from parl.algorithms import DQN
    from parl.models import MLPQModel

    return DQN(lambda: MLPQModel(obs_dim=4, num_actions=2, hidden_sizes=(8,)))


def _requests(*samples, states=None) -> List[object]:
    requests = []
    for sample in samples:
        request = EXT.Parking()
        request._inputs = sample
        request._states = states
        requests.append(request)
    return requests


# -- join ------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2,), (2, 3), (1,)])
def test_join_stacks_exact_samples_into_a_fresh_array(shape) -> None:
    rows = [np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + i for i in range(5)]
    joined = EXT.join(_requests(*({"obs": r} for r in rows)), "obs", shape, F32)
    np.testing.assert_array_equal(joined, np.stack(rows))
    assert joined.dtype is F32 and joined.shape == (5,) + shape and joined.flags.c_contiguous
    assert not any(np.shares_memory(joined, r) for r in rows)


class _Sub(np.ndarray):
    pass


@pytest.mark.parametrize(
    "sample, states",
    [
        ({"obs": np.zeros(2, np.float64)}, None),
        ({"obs": np.zeros(3, np.float32)}, None),
        ({"obs": np.zeros((1, 2), np.float32)}, None),
        ({"obs": np.zeros(4, np.float32)[::2]}, None),
        ({"obs": np.zeros(2, np.float32).view(_Sub)}, None),
        ({"obs": [0.0, 0.0]}, None),
        ({"obs": np.zeros(2, np.float32), "extra": 1}, None),
        ({"observation": np.zeros(2, np.float32)}, None),
        ([np.zeros(2, np.float32)], None),
        ({"obs": np.zeros(2, np.float32)}, {}),
    ],
    ids=["float64", "longer", "rank", "strided", "subclass", "list", "extra", "renamed", "not-a-dict", "states"],
)
def test_join_leaves_any_unusual_sample_to_the_python_path(sample, states) -> None:
    good = _requests({"obs": np.ones(2, np.float32)}, {"obs": np.ones(2, np.float32)})
    odd = _requests(sample, states=states)
    assert EXT.join(good + odd, "obs", (2,), F32) is None
    assert EXT.join(odd + good, "obs", (2,), F32) is None
    assert EXT.join(good, "obs", (2,), F32) is not None


def test_join_refuses_arguments_of_the_wrong_kind() -> None:
    requests = _requests({"obs": np.zeros(2, np.float32)})
    with pytest.raises(TypeError, match="batch must be a list"):
        EXT.join(tuple(requests), "obs", (2,), F32)
    with pytest.raises(TypeError, match=r"batch\[1\] is not a Parking request"):
        EXT.join(requests + [object()], "obs", (2,), F32)
    with pytest.raises(TypeError, match="dtype must be a numpy dtype"):
        EXT.join(requests, "obs", (2,), np.float32)
    with pytest.raises(TypeError, match="shape must be a tuple"):
        EXT.join(requests, "obs", [2], F32)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        EXT.join(requests, "obs", (2,))


# -- hand_out and resumed_sum ---------------------------------------------------------------


@pytest.mark.parametrize("values", [np.arange(6, dtype=np.int64).reshape(3, 2), np.arange(3.0)], ids=["2-D", "1-D"])
def test_hand_out_queues_what_the_python_stage_queues(values) -> None:
    batch = _requests({}, {}, {})
    for i, request in enumerate(batch):
        request._parked_at = 10.0 * (i + 1)
    ready_c, ready_py = [], []
    parked_c = EXT.hand_out(batch, "action", values, ready_c)
    parked_py = batching._stage(batch, {"action": values}, {}, ready_py)
    assert parked_c == parked_py == 60.0
    assert [request for request, _ in ready_c] == [request for request, _ in ready_py] == batch[::-1]
    for (_, (actions_c, states_c)), (_, (actions_py, states_py)) in zip(ready_c, ready_py):
        assert states_c == states_py == {}
        assert list(actions_c) == ["action"]
        assert type(actions_c["action"]) is type(actions_py["action"])
        np.testing.assert_array_equal(actions_c["action"], actions_py["action"])
    rows = [actions["action"] for _, (actions, _) in ready_c]
    if values.ndim == 2:
        assert all(np.shares_memory(row, values) for row in rows)  # row views, as in Python
    assert len({id(states) for _, (_, states) in ready_c}) == 3  # a fresh next-states dict per agent


def test_hand_out_refuses_another_number_of_rows() -> None:
    ready: list = []
    with pytest.raises(ValueError, match="the task answered 2 rows of 'action' for a batch of 3"):
        EXT.hand_out(_requests({}, {}, {}), "action", np.zeros((2, 1)), ready)
    with pytest.raises(ValueError, match="the task answered 2 rows of 'action' for a batch of 3"):
        batching._stage(_requests({}, {}, {}), {"action": np.zeros((2, 1))}, {}, ready)
    with pytest.raises(TypeError):
        EXT.hand_out(_requests({}), "action", np.float32(1.0), ready)
    assert ready == []


def test_resumed_sum_adds_the_resume_times() -> None:
    batch = _requests({}, {}, {})
    for i, request in enumerate(batch):
        request._resumed_at = 0.5 * i
    assert EXT.resumed_sum(batch) == batching._resumed_sum(batch) == 1.5
    assert EXT.resumed_sum([]) == 0.0


# -- Parking.predict ------------------------------------------------------------------------


class _Request(EXT.Parking if EXT is not None else object):
    def _outside_error(self) -> Exception:
        return RuntimeError("outside its scheduler")


def _attached(run, pending: list, ready: list) -> _Request:
    request = _Request()
    request._greenlet = greenlet(run)
    request._hub = getcurrent()
    request._pending, request._ready = pending, ready
    return request


def test_predict_parks_and_returns_the_row_it_is_resumed_with() -> None:
    pending: list = []
    got = []
    request = _attached(lambda: got.append(request.predict({"obs": 1}, states=None)), pending, [])
    before = perf_counter()
    request._greenlet.switch()  # runs until it parks
    assert pending == [request] and request._inputs == {"obs": 1} and request._states is None
    assert before <= request._parked_at <= perf_counter()
    request._greenlet.switch("row")
    assert got == ["row"] and request._greenlet.dead


def test_a_parking_agent_hands_over_to_the_next_ready_one() -> None:
    pending: list = []
    ready: list = []
    got: dict = {"a": [], "b": []}

    def run_a():
        got["a"].append(a.predict(inputs={"obs": "a1"}))
        got["a"].append(a.predict({"obs": "a2"}))  # hands over to b

    def run_b():
        got["b"].append(b.predict({"obs": "b1"}, {"h": 0}))

    a, b = _attached(run_a, pending, ready), _attached(run_b, pending, ready)
    a._greenlet.switch()
    b._greenlet.switch()
    assert pending == [a, b] and b._states == {"h": 0}
    pending.clear()
    ready.append((b, "row b"))
    a._greenlet.switch("row a")  # a steps, parks again, and b runs to its end
    assert got == {"a": ["row a"], "b": ["row b"]}
    assert ready == [] and pending == [a] and b._greenlet.dead
    assert b._resumed_at == a._parked_at


def test_predict_outside_its_greenlet_raises_the_communicators_error() -> None:
    request = _attached(lambda: None, [], [])
    with pytest.raises(RuntimeError, match="outside its scheduler"):
        request.predict({"obs": 1})
    assert request._pending == []


def test_a_park_that_cannot_hand_over_leaves_the_queues_as_they_were() -> None:
    ready = [("not a request", "row")]
    request = _attached(lambda: request.predict({"obs": 1}), [], ready)
    with pytest.raises(TypeError, match=r"not a \(Parking, row\) pair"):
        request._greenlet.switch()
    assert request._pending == [] and ready == [("not a request", "row")]
    assert request._inputs == {}  # the sample was not stored either


def test_predict_refuses_bad_arguments() -> None:
    request = _attached(lambda: None, [], [])
    with pytest.raises(TypeError, match="missing required argument 'inputs'"):
        request.predict()
    with pytest.raises(TypeError, match="at most 2 arguments"):
        request.predict({}, None, None)
    with pytest.raises(TypeError, match="unexpected or repeated keyword argument 'state'"):
        request.predict({}, state=None)
    with pytest.raises(TypeError, match="unexpected or repeated keyword argument 'inputs'"):
        request.predict({}, inputs={})
