"""Data specs: bad data is refused in the sender's thread with a message naming the spec.

Bad spec declarations are refused when the task is built.
"""

from __future__ import annotations

import numpy as np
import pytest

import parl
from parl.core.errors import StoppedError

from toys import WAIT, CountEnv, EchoAgent, EchoAlgorithm, EchoModel, count_puts

SPEC_MODEL_ARGS = dict(
    input_specs=[("obs", dict(shape=[2], dtype="float32")), ("count", dict(shape=[1], dtype="int64"))],
    state_specs=[("h", dict(shape=[3], dtype="float32"))],
)

GOOD_INPUTS = {"obs": np.zeros(2, np.float32), "count": np.array([3])}
GOOD_STATES = {"h": np.zeros(3, np.float32)}


@pytest.fixture
def wrapper():
    """A wrapper whose threads are never started: checks must fail before anything is queued."""
    task = parl.ComputationTask("T", EchoAlgorithm(lambda: EchoModel(**SPEC_MODEL_ARGS)))
    wrapper = parl.ComputationWrapper(task)
    wrapper.puts = count_puts(wrapper.prediction_queue)
    return wrapper


def _replace(d: dict, **changes) -> dict:
    out = dict(d)
    for key, value in changes.items():
        if value is None:
            out.pop(key)
        else:
            out[key] = value
    return out


BAD_PREDICTIONS = [
    # (inputs, states, words the message must contain)
    (_replace(GOOD_INPUTS, obs=np.zeros(3, np.float32)), GOOD_STATES, ["'obs'", "expected shape [2]", "got [3]"]),
    (
        _replace(GOOD_INPUTS, obs=np.zeros((1, 2), np.float32)),
        GOOD_STATES,
        ["'obs'", "expected shape [2]", "got [1, 2]"],
    ),
    (_replace(GOOD_INPUTS, count=np.array([1.5])), GOOD_STATES, ["'count'", "expected dtype int64", "got float64"]),
    (_replace(GOOD_INPUTS, obs=np.array(["a", "b"])), GOOD_STATES, ["'obs'", "expected dtype float32", "got str"]),
    (_replace(GOOD_INPUTS, count=None), GOOD_STATES, ["expected keys ['count', 'obs']", "got ['obs']"]),
    (_replace(GOOD_INPUTS, extra=np.zeros(1)), GOOD_STATES, ["expected keys ['count', 'obs']", "'extra'"]),
    (GOOD_INPUTS, {"h": np.zeros(4, np.float32)}, ["state 'h'", "expected shape [3]", "got [4]"]),
    (GOOD_INPUTS, None, ["state", "expected keys ['h']", "got []"]),
]


@pytest.mark.parametrize("inputs, states, words", BAD_PREDICTIONS)
def test_communicator_predict_refuses_bad_data(wrapper, inputs, states, words) -> None:
    comm = wrapper.communicator(0)
    with pytest.raises(ValueError) as info:
        comm.predict(inputs, states)
    message = str(info.value)
    assert "task 'T'" in message
    for word in words:
        assert word in message, message
    assert not wrapper.puts.acquire(timeout=0), "bad data must not reach the wrapper"


@pytest.mark.parametrize("inputs, states, words", BAD_PREDICTIONS)
def test_helper_predict_refuses_bad_data(wrapper, inputs, states, words) -> None:
    helper = parl.OnPolicyHelper()
    helper.bind(wrapper.communicator(0))
    with pytest.raises(ValueError) as info:
        helper.predict(inputs, states)
    for word in words:
        assert word in str(info.value)
    assert not wrapper.puts.acquire(timeout=0)


def test_good_data_is_accepted_and_cast(wrapper) -> None:
    """The control for the tests above: good data (an int count for a float obs too) reaches the queue."""
    wrapper.stop()  # the request is refused with StoppedError only after passing the checks
    comm = wrapper.communicator(0)
    with pytest.raises(StoppedError):
        comm.predict({"obs": np.array([1, 2]), "count": 3}, GOOD_STATES)


GOOD_TRANSITION = dict(
    inputs=GOOD_INPUTS,
    actions={"action": np.array([1])},
    rewards=1.0,
    next_inputs=GOOD_INPUTS,
    terminated=False,
    truncated=False,
    states=GOOD_STATES,
    next_states=GOOD_STATES,
)

BAD_TRANSITIONS = [
    (dict(actions={"action": np.array([1.0])}), ["action 'action'", "expected dtype int64", "got float64"]),
    (dict(actions={"action": np.array([1, 0])}), ["action 'action'", "expected shape [1]", "got [2]"]),
    (dict(actions={}), ["action", "expected keys ['action']", "got []"]),
    (dict(actions={"action": np.array([1]), "logp": np.zeros(1)}), ["action", "'logp'"]),
    (dict(rewards=np.ones(2)), ["reward 'reward'", "expected shape [1]", "got [2]"]),
    (dict(rewards={"bonus": 1.0}), ["reward", "expected keys ['reward']", "got ['bonus']"]),
    (
        dict(next_inputs=_replace(GOOD_INPUTS, obs=np.zeros(5, np.float32))),
        ["next input 'obs'", "expected shape [2]", "got [5]"],
    ),
    (dict(next_inputs=_replace(GOOD_INPUTS, count=None)), ["next input", "expected keys ['count', 'obs']"]),
    (
        dict(inputs=_replace(GOOD_INPUTS, count=np.array([0.5], np.float32))),
        ["input 'count'", "expected dtype int64", "got float32"],
    ),
    (dict(next_states={"h": np.zeros((3, 1), np.float32)}), ["next state 'h'", "expected shape [3]", "got [3, 1]"]),
]


@pytest.mark.parametrize("helper_class", [parl.OnPolicyHelper, parl.ExpReplayHelper])
@pytest.mark.parametrize("changes, words", BAD_TRANSITIONS)
def test_store_data_refuses_bad_data(wrapper, helper_class, changes, words) -> None:
    helper = helper_class()
    helper.bind(wrapper.communicator(0))
    helper.store_data(**GOOD_TRANSITION)  # the control: accepted
    with pytest.raises(ValueError) as info:
        helper.store_data(**{**GOOD_TRANSITION, **changes})
    for word in words:
        assert word in str(info.value), str(info.value)


def test_store_data_nothing_is_stored_from_a_bad_transition(wrapper) -> None:
    helper = parl.ExpReplayHelper()
    helper.bind(wrapper.communicator(0))
    with pytest.raises(ValueError):
        helper.store_data(**{**GOOD_TRANSITION, "actions": {"action": np.array([0.5])}})
    assert len(helper.buffer) == 0


def test_a_plain_number_reward_needs_a_single_reward_spec() -> None:
    task = parl.ComputationTask(
        "T",
        EchoAlgorithm(
            lambda: EchoModel(
                reward_specs=[("reward", dict(shape=[1], dtype="float32")), ("cost", dict(shape=[1], dtype="float32"))]
            )
        ),
    )
    helper = parl.OnPolicyHelper()
    helper.bind(parl.ComputationWrapper(task).communicator(0))
    transition = dict(
        inputs={"obs": np.zeros(2)},
        actions={"action": np.array([0])},
        rewards=1.0,
        next_inputs={"obs": np.zeros(2)},
        terminated=False,
        truncated=False,
    )
    with pytest.raises(ValueError, match=r"expected a dict with keys \['reward', 'cost'\]"):
        helper.store_data(**transition)
    helper.store_data(**{**transition, "rewards": {"reward": 1.0, "cost": 0.5}})


# -- declarations -------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, declared, words",
    [
        ("input", [("obs", dict(shape=[0], dtype="float32"))], ["'obs'", "positive ints", "[0]"]),
        ("input", [("obs", dict(shape=[-1]))], ["'obs'", "positive ints"]),
        ("input", [("obs", dict(shape=4))], ["'obs'", "positive ints", "4"]),
        ("input", [("obs", dict(shape=[2.0]))], ["'obs'", "positive ints"]),
        ("input", [("obs", dict(shape=[True]))], ["'obs'", "positive ints"]),
        ("input", [("obs", dict(shape=[2], dtype="float99"))], ["'obs'", "unknown dtype 'float99'"]),
        ("input", [("obs", dict(shape=[2], dtype="str"))], ["'obs'", "numeric or bool"]),
        ("input", [("obs", dict(shape=[2], dtype=None))], ["'obs'", "unknown dtype None"]),
        ("input", [("obs", dict(dtype="float32"))], ["'obs'", "needs 'shape'"]),
        ("input", [("obs", dict(shape=[2], low=0))], ["'obs'", "'low'"]),
        ("input", [("obs", dict(shape=[2])), ("obs", dict(shape=[3]))], ["'obs'", "declared twice"]),
        ("input", [("", dict(shape=[2]))], ["non-empty strings"]),
        ("input", [("obs", [2], "float32")], ["expected (name, dict(shape=..., dtype=...))"]),
        ("input", {"obs": dict(shape=[2])}, ["expected a list"]),
        ("action", [("action", dict(shape=[1], dtype="complex64"))], ["'action'", "numeric or bool"]),
        ("state", [("h", dict(shape=[0]))], ["'h'", "positive ints"]),
        ("reward", [("reward", dict(shape=[1], dtype="object"))], ["'reward'", "numeric or bool"]),
    ],
)
def test_bad_spec_declarations_raise(kind, declared, words) -> None:
    model_func = lambda: EchoModel(**{f"{kind}_specs": declared})  # noqa: E731
    with pytest.raises(ValueError) as info:
        parl.ComputationTask("T", EchoAlgorithm(model_func))
    message = str(info.value)
    assert "EchoModel" in message and "task 'T'" in message
    for word in words:
        assert word in message, message


# -- in a running robot ---------------------------------------------------------


def test_one_agent_sending_bad_data_fails_alone(make_manager) -> None:
    manager = make_manager()
    games = 4

    def wrong_shape_in_episode_2(inputs, episode):
        return {"obs": np.zeros(3, np.float32)} if episode == 2 else inputs

    for code in range(4):
        corrupt = wrong_shape_in_episode_2 if code == 1 else None
        manager.add_agent(
            EchoAgent(CountEnv(code), num_games=games, corrupt=corrupt), {"T": parl.OnPolicyHelper(sample_interval=2)}
        )
    manager.start()
    episodes = manager.join(timeout=WAIT * 4)
    assert not manager.running()

    assert len(manager.errors) == 1
    error = manager.errors[0]
    assert isinstance(error, parl.AgentError)
    assert (error.agent_id, error.episode) == (1, 2)
    assert isinstance(error.original, ValueError)
    for word in ("agent 1", "episode 2", "'obs'", "expected shape [2]", "got [3]", "Traceback", "run_one_episode"):
        assert word in str(error), str(error)

    per_agent = {i: sorted(e["episode"] for e in episodes if e["agent_id"] == i) for i in range(4)}
    assert per_agent[1] == [0, 1]
    for i in (0, 2, 3):
        assert per_agent[i] == list(range(games))
    assert all(agent.mismatches == 0 for agent in manager.agents)
