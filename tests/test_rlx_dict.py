"""Dict observations over RLX: the welcome describes the Dict space (key -> box or discrete), a client
sends each observation as a map of key -> array, the server checks every key against its space (a bad
one ends only its sender, naming the key), and the agent on the server gets the dict, each key an input
of the model of that name, and learns from it. Version 1 clients still play robots of Box spaces."""

from __future__ import annotations

import re
from typing import Iterator, Tuple

import numpy as np
import pytest
from dict_obs import IMAGE_SHAPE, NUM_ACTIONS, DictAgent, DictEnv, TwoInputQModel, dict_obs, dict_space

import parl
import parl.rlx
from parl.algorithms import DQN
from parl.rlx import spaces
from parl.rlx.errors import BAD_MESSAGE, VERSION, ProtocolError, ServerError
from parl.rlx.framing import decode, encode
from parl.rlx.messages import Init, Step, parse_client
from parl.runtime.rlx.settings import ServerSettings

from toys import RawConnection, rlx_address, wait_for

IMAGE = np.zeros(IMAGE_SHAPE, np.uint8)
VEC = np.zeros(3, np.float32)


@pytest.fixture
def dict_server() -> Iterator[Tuple[parl.Manager, str]]:
    """A started RLX robot of two slots whose environment has Dict observations: DQN over
    TwoInputQModel, DictAgents with small replays; stopped after the test."""
    manager = parl.Manager(
        {"T": parl.TaskSettings(lambda: DQN(TwoInputQModel, learning_rate=1e-3))},
        placement=ServerSettings(bind="127.0.0.1:0"),
        thread_placement="os",
    )
    for index in range(2):
        agent = DictAgent(manager.environment(DictEnv), seed=index)
        manager.add_agent(agent, {"T": parl.ExpReplayHelper(capacity=64, batch_size=4, warmup_steps=8)})
    manager.start()
    try:
        yield manager, rlx_address(manager)
    finally:
        manager.stop()


def test_dict_spaces_are_described_and_read_back() -> None:
    described = spaces.describe(dict_space())
    assert isinstance(described, spaces.DictSpace) and sorted(described.spaces) == ["image", "vec"]
    data = decode(encode({"s": described.to_data()})[4:])["s"]
    assert data["type"] == "dict" and data["spaces"]["image"]["dtype"] == "uint8"
    assert spaces.from_data(data, "s") == described
    assert described.to_gymnasium() == dict_space()
    with pytest.raises(ProtocolError, match=r"s.vec: not a box or discrete space"):
        spaces.from_data({"type": "dict", "spaces": {"vec": {"type": "dict", "spaces": {}}}}, "s")
    with pytest.raises(ProtocolError, match=r"s: a dict space is \{type, spaces: a map\}"):
        spaces.from_data({"type": "dict", "spaces": {}}, "s")
    with pytest.raises(ProtocolError, match=r"action_space: not a box or discrete space"):
        spaces.action_from_data(data, "action_space")
    import gymnasium

    nested = gymnasium.spaces.Dict(inner=dict_space())
    with pytest.raises(ValueError, match=r"Dict key 'inner': RLX serves Box and Discrete spaces, got a Dict space"):
        spaces.describe(nested)


def test_dict_observations_travel_as_maps_of_arrays() -> None:
    obs = dict_obs(np.random.default_rng(0))
    for message in (Init(obs), Step(1.0, obs, truncated=True)):
        read = parse_client(encode(message.to_data())[4:])
        assert sorted(read.obs) == ["image", "vec"]
        for key in obs:
            assert read.obs[key].dtype == obs[key].dtype
            np.testing.assert_array_equal(read.obs[key], obs[key])
    # a box observation still reads as the array it was
    assert parse_client(encode(Init(np.zeros(2, np.float32)).to_data())[4:]).obs.shape == (2,)


def test_a_client_plays_a_dict_env_and_the_agent_learns_from_its_dicts(dict_server) -> None:
    manager, address = dict_server
    env = DictEnv(length=6)
    with parl.rlx.Client(address) as client:
        assert client.observation_space.to_gymnasium() == env.observation_space
        assert client.action_space.to_data() == {"type": "discrete", "n": NUM_ACTIONS, "start": 0}
        played = parl.rlx.drive(env, client, episodes=4, seed=3)
    assert [result.length for result in played] == [6, 6, 6, 6]
    assert wait_for(lambda: len(manager.episodes()) == 4)
    seen = [obs for agent in manager.agents for obs in agent.seen]
    assert len(seen) == 24
    first = seen[0]
    assert sorted(first) == ["image", "vec"]
    assert first["image"].dtype == np.uint8 and first["image"].shape == IMAGE_SHAPE
    assert first["vec"].dtype == np.float32
    expected, _ = DictEnv(length=6).reset(seed=3)  # the first observation the client sent
    assert any(np.array_equal(obs["image"], expected["image"]) for obs in seen)
    assert manager.tasks["T"].update_steps > 0 and manager.errors == []


@pytest.mark.parametrize(
    "obs, text",
    [
        (
            {"image": IMAGE},
            r"init: 'obs': keys \['image', 'vec'\] expected, missing \['vec'\]",
        ),
        (
            {"image": IMAGE, "vec": VEC, "depth": 1.0},
            r"unknown \['depth'\]",
        ),
        (
            {"image": IMAGE, "vec": np.zeros(4, np.float32)},
            r"init: 'vec': expected shape \[3\], got \[4\]",
        ),
        (
            {"image": IMAGE, "vec": np.array([0.0, np.nan, 0.0], np.float32)},
            r"init: 'vec'.*not finite",
        ),
        (
            {"image": np.zeros((7, 7), np.uint8), "vec": VEC},
            r"init: 'image': expected shape \[7, 7, 1\]",
        ),
        (
            {"image": np.zeros(IMAGE_SHAPE, np.float32), "vec": VEC},
            r"init: 'image': expected dtype uint8",
        ),
        (np.zeros(3, np.float32), r"init: 'obs': expected a map of keys \['image', 'vec'\], got an array"),
    ],
)
def test_a_bad_dict_observation_ends_only_its_sender_naming_the_key(dict_server, obs: object, text: str) -> None:
    manager, address = dict_server
    with parl.rlx.Client(address) as good:
        bad = RawConnection(address)
        bad.send_bytes(encode({"type": "hello", "version": 2}))
        assert bad.read()["type"] == "welcome"
        bad.send_bytes(encode({"type": "init", "obs": obs}))
        reply = bad.read()
        assert (reply["type"], reply["code"]) == ("error", BAD_MESSAGE)
        assert re.search(text, reply["message"]), reply["message"]
        played = parl.rlx.drive(DictEnv(length=3), good, episodes=1, seed=0)
        assert played[0].length == 3
    assert manager.errors == []


def test_a_version_1_client_is_told_the_dict_space_needs_version_2(dict_server) -> None:
    _, address = dict_server
    conn = RawConnection(address)
    conn.send_bytes(encode({"type": "hello", "version": 1}))
    reply = conn.read()
    assert (reply["type"], reply["code"]) == ("error", VERSION)
    assert "dict space, carried since RLX version 2; the client speaks version 1" in reply["message"]


def test_a_version_1_client_plays_a_box_robot_as_before(rlx_server) -> None:
    _, address = rlx_server(slots=1)
    conn = RawConnection(address)
    conn.send_bytes(encode({"type": "hello", "version": 1}))
    welcome = conn.read()
    assert welcome["version"] == 1 and welcome["observation_space"]["type"] == "box"
    conn.send_bytes(encode({"type": "init", "obs": [3000.0, 0.0]}))
    reply = conn.read()
    assert (reply["type"], reply["action"]) == ("action", 3000)


def test_the_client_refuses_an_observation_without_the_space_keys(dict_server) -> None:
    _, address = dict_server
    with parl.rlx.Client(address) as client:
        with pytest.raises(ValueError, match=r"maps of keys \['image', 'vec'\], got \['image'\]"):
            client.init({"image": IMAGE})
        with pytest.raises(ValueError, match=r"got ndarray"):
            client.init(np.zeros(3))
        with pytest.raises(ServerError):  # unchanged otherwise: an observation the server refuses
            client.init({"image": IMAGE, "vec": np.full(3, 1e9)})
