"""An RLX server (placement "rlx") live on a loopback port: clients play episodes with RELAAX's semantics,
their requests are batched together, and the server keeps its limits: the token, the (max+1)th client
refused at once, the memory floor, idle, handshake and episode timeouts, requests out of order. What a
stream of hostile frames does is tests/test_rlx_fuzz.py's; ``parl serve`` is tests/test_rlx_serve.py's."""

from __future__ import annotations

import logging
import threading
import time
from typing import List, Tuple

import numpy as np
import pytest

import parl.rlx
from parl.rlx.errors import BAD_MESSAGE, BUSY, SHUTDOWN, TIMEOUT, UNAUTHORIZED, VERSION, ProtocolError, ServerError
from parl.rlx.framing import encode
from parl.runtime.rlx.settings import ServerSettings
from parl.validation import ParameterError

from toys import (
    RLX_ACTIONS,
    WAIT,
    FailingGymAgent,
    RawConnection,
    RecordingHelper,
    SpacesEnv,
    echo_algorithm_func,
    rlx_address,
    rlx_obs,
    wait_for,
)

TOKEN = b"0123456789abcdef0123456789abcdef"


def stored(manager: parl.Manager, slot: int, count: int = 0) -> List[Tuple[parl.Transition, bool]]:
    """The transitions slot ``slot``'s agent stored, with their ``episode_over``, once there are at least
    ``count`` (a ``done`` is sent before the agent stores the last transition of its episode)."""
    transitions = manager.agents[slot].helpers["T"].stored
    assert wait_for(lambda: len(transitions) >= count), f"{len(transitions)} transitions stored, waited for {count}"
    return transitions


def play(client: parl.rlx.Client, code: int, steps: int) -> float:
    """One episode of ``steps`` actions, each checked to be the echo of its observation; its return."""
    assert client.init(rlx_obs(code, 0)) == 1000 * code
    for step in range(1, steps):
        assert client.send(1.0, rlx_obs(code, step)) == 1000 * code + step
    return client.reset(1.0)


def test_a_client_plays_episodes_and_the_robot_records_them(rlx_server) -> None:
    manager, address = rlx_server(slots=2)
    with parl.rlx.Client(address) as client:
        assert client.action_space.to_data() == {"type": "discrete", "n": RLX_ACTIONS, "start": 0}
        assert client.observation_space.shape == (2,) and client.limits["max_frame_bytes"] == 1 << 20
        assert (client.slot, client.env_steps) == (0, 0)
        returns = [play(client, code=3, steps=5), play(client, code=3, steps=7)]
        assert returns == [5.0, 7.0] and client.episode_length == 7
        assert 0 < client.weights_version <= manager.tasks["T"].update_steps
    assert wait_for(lambda: len(manager.episodes()) == 2)
    assert [(e["agent_id"], e["reward"], e["steps"]) for e in manager.episodes()] == [(0, 5.0, 5), (0, 7.0, 7)]
    assert manager.errors == [] and manager.agents[0].total_steps == 12


def test_requests_of_several_clients_are_batched_into_one_prediction(rlx_server) -> None:
    manager, address = rlx_server(slots=3)
    clients = [parl.rlx.Client(address) for _ in range(3)]
    queue = manager.runner.queue(manager.wrappers["T"])
    batches = manager.tasks["T"].algorithm.prediction_batches
    manager.pause()
    answers = {}
    threads = [
        threading.Thread(target=lambda i=i: answers.update({i: clients[i].init(rlx_obs(i, 0))})) for i in range(3)
    ]
    for thread in threads:
        thread.start()
    assert wait_for(lambda: len(queue.pending) == 3)  # every request waits, paused
    manager.resume()
    for thread in threads:
        thread.join(5.0)
    assert answers == {0: 0, 1: 1000, 2: 2000}
    assert sorted(batches[-1][:, 0].tolist()) == [0.0, 1000.0, 2000.0]  # one prediction for the three
    for client in clients:
        client.disconnect()


def test_reset_ends_an_episode_terminated_unless_truncated_and_a_truncation_bootstraps_from_its_obs(
    rlx_server,
) -> None:
    manager, address = rlx_server(slots=1)
    with parl.rlx.Client(address) as client:
        client.init(rlx_obs(1, 0))
        client.send(2.0, rlx_obs(1, 1))
        assert client.reset(3.0) == 5.0  # terminated
        client.init(rlx_obs(1, 10))
        assert client.reset(0.5, truncated=True, obs=rlx_obs(1, 11)) == 0.5
        client.init(rlx_obs(1, 20))
        assert client.reset(0.25, truncated=True) == 0.25  # no obs: the one before stands in
    transitions = stored(manager, 0, 4)
    ends = [(float(t.next_episode_end[0]), over, float(t.next_inputs["obs"][0])) for t, over in transitions]
    assert ends == [(0.0, False, 1001.0), (1.0, True, 1001.0), (0.0, True, 1011.0), (0.0, True, 1020.0)]
    assert [float(t.rewards["reward"][0]) for t, _ in transitions] == [2.0, 3.0, 0.5, 0.25]


def test_a_step_that_says_terminated_or_truncated_ends_the_episode_with_done(rlx_server) -> None:
    manager, address = rlx_server(slots=1)
    raw = RawConnection(address)
    assert raw.hello()["type"] == "welcome"
    for flag, end in (("terminated", 1.0), ("truncated", 0.0)):
        raw.send({"type": "init", "obs": [5.0, 0.0]})
        assert raw.read() == {"type": "action", "action": 5, "weights_version": manager.tasks["T"].update_steps}
        raw.send({"type": "step", "reward": 4, "obs": [6.0, 0.0], flag: True})
        assert raw.read() == {"type": "done", "return": 4.0, "length": 1}
        transition, over = stored(manager, 0, 1 if flag == "terminated" else 2)[-1]
        assert over and float(transition.next_episode_end[0]) == end
    raw.close()


def test_the_action_a_client_took_instead_is_the_one_learned_from(rlx_server) -> None:
    manager, address = rlx_server(slots=1)
    with parl.rlx.Client(address) as client:
        assert client.init(rlx_obs(2, 0)) == 2000
        client.send(1.0, rlx_obs(2, 1), action_taken=7)
        client.reset(1.0, action_taken=np.int64(9))
    assert [int(t.actions["action"][0]) for t, _ in stored(manager, 0, 2)] == [7, 9]
    raw = RawConnection(address)
    raw.hello()
    raw.send({"type": "init", "obs": [1.0, 0.0]})
    raw.read()
    raw.send({"type": "step", "reward": 1.0, "obs": [2.0, 0.0], "action_taken": RLX_ACTIONS})
    error = raw.read()
    assert (
        error["code"] == BAD_MESSAGE and "action_taken" in error["message"] and "outside its range" in error["message"]
    )


def test_a_server_with_a_token_refuses_clients_without_it(rlx_server) -> None:
    _, address = rlx_server(slots=2, token=TOKEN)
    for token in (None, b"x" * 32, TOKEN[:-1]):
        with pytest.raises(ServerError) as info:
            parl.rlx.Client(address, token)
        assert info.value.code == UNAUTHORIZED and "the token is missing or wrong" in info.value.message
    with parl.rlx.Client(address, TOKEN.decode()) as client:
        assert play(client, code=1, steps=3) == 3.0


def test_a_server_refuses_to_listen_beyond_loopback_without_a_token_of_32_bytes() -> None:
    with pytest.raises(ParameterError, match="token must be a secret of at least 32 bytes to listen on 0.0.0.0:7070"):
        ServerSettings(bind="0.0.0.0:7070")
    with pytest.raises(ParameterError, match=r"token must be bytes, 32 to 4096 of them, got '<31>'"):
        ServerSettings(bind="0.0.0.0:7070", token=TOKEN[:31])
    assert ServerSettings(bind="0.0.0.0:7070", token=TOKEN).token == TOKEN
    assert "0123" not in repr(ServerSettings(token=TOKEN))  # never shown
    for bad in ({"bind": "7070"}, {"max_frame_bytes": 10}, {"idle_timeout": 0}, {"episode_timeout": -1.0}):
        with pytest.raises(ParameterError, match=f"^{next(iter(bad))} must be"):
            ServerSettings(**bad)


def test_the_client_beyond_max_clients_is_refused_at_once_and_the_others_go_on(rlx_server) -> None:
    manager, address = rlx_server(slots=2)
    first, second = parl.rlx.Client(address), parl.rlx.Client(address)
    first.init(rlx_obs(1, 0))
    start = time.perf_counter()
    with pytest.raises(ServerError) as info:
        parl.rlx.Client(address)
    assert time.perf_counter() - start < 0.1
    assert info.value.code == BUSY and info.value.message == "all 2 slots are taken"
    assert first.send(1.0, rlx_obs(1, 1)) == 1001 and play(second, code=2, steps=3) == 3.0
    second.disconnect()  # its slot is free again
    assert wait_for(lambda: manager.runner.slots[1].connection is None)
    with parl.rlx.Client(address) as third:
        assert third.slot == 1 and play(third, code=3, steps=2) == 2.0
    first.disconnect()
    rows = manager.placement_metrics()
    assert rows[0][1]["rlx/refused"] == 1.0 and rows[0][1]["rlx/accepted"] == 3.0


def test_connections_without_a_hello_hold_no_slot(rlx_server) -> None:
    manager, address = rlx_server(slots=2, token=TOKEN)
    silent = [RawConnection(address) for _ in range(4)]
    wrong = RawConnection(address)
    assert wrong.hello(b"x" * 32)["code"] == UNAUTHORIZED
    with parl.rlx.Client(address, TOKEN) as first, parl.rlx.Client(address, TOKEN) as second:
        assert sorted([first.slot, second.slot]) == [0, 1]
        assert play(first, code=1, steps=2) == 2.0 and play(second, code=2, steps=2) == 2.0
        assert wait_for(lambda: manager.runner.stats.clients == 6)  # the silent ones are still open
        late = RawConnection(address)  # every slot taken: busy at once, without a hello
        assert late.read_all() == [{"type": "error", "code": BUSY, "message": "all 2 slots are taken"}]
    assert silent[0].hello(TOKEN)["type"] == "welcome"  # a slot is free again: taken at the hello
    assert silent[1].hello(TOKEN)["type"] == "welcome"
    assert silent[2].hello(TOKEN) == {"type": "error", "code": BUSY, "message": "all 2 slots are taken"}
    for raw in silent:
        raw.close()


def test_beyond_max_handshakes_a_new_connection_ends_the_oldest_silent_one(rlx_server) -> None:
    manager, address = rlx_server(slots=1, max_handshakes=2)
    oldest, older = RawConnection(address), RawConnection(address)
    assert wait_for(lambda: manager.runner.stats.accepted == 2)
    newest = RawConnection(address)
    assert oldest.read_all() == [
        {"type": "error", "code": TIMEOUT, "message": "no hello before newer connections came"}
    ]
    assert older.hello()["type"] == "welcome"
    assert newest.hello()["code"] == BUSY  # its place among the waiting was kept; the one slot is older's
    assert manager.runner.stats.timeouts == 1
    older.close()


def test_an_address_opens_at_most_max_connections_per_address(rlx_server) -> None:
    manager, address = rlx_server(slots=4, max_connections_per_address=2)
    first, second = RawConnection(address), parl.rlx.Client(address)
    third = RawConnection(address)
    assert third.read_all() == [
        {
            "type": "error",
            "code": BUSY,
            "message": "2 connections from 127.0.0.1 are open, the most one address may have",
        }
    ]
    first.close()
    assert wait_for(lambda: manager.runner.stats.clients == 1)
    with parl.rlx.Client(address) as again:  # room again
        assert play(again, code=1, steps=2) == 2.0
    second.disconnect()


def test_admission_makes_room_at_the_address_with_the_most_connections_waiting() -> None:
    from parl.runtime.rlx.admission import Admission

    admission = Admission(max_handshakes=3, max_per_address=2)
    for conn, host in (("a", "10.0.0.1"), ("b", "10.0.0.2"), ("c", "10.0.0.2")):
        assert not admission.full() and admission.refusal(host) is None
        admission.opened(conn, host)
    assert admission.full() and admission.oldest_waiting() == "b"  # 10.0.0.2's oldest, though "a" is older
    assert admission.refusal("10.0.0.2") == "2 connections from 10.0.0.2 are open, the most one address may have"
    admission.admitted("b")  # plays a slot: no longer waiting, still open
    assert not admission.full() and admission.waiting == 2 and admission.refusal("10.0.0.2") is not None
    admission.closed("b")
    admission.closed("b")  # once only
    assert admission.refusal("10.0.0.2") is None and admission.oldest_waiting() == "a"


def test_a_client_is_refused_while_memory_is_below_the_floor(rlx_server) -> None:
    _, address = rlx_server(slots=2, min_free_memory=1 << 60)
    with pytest.raises(ServerError, match=r"busy: \d+ MiB of memory available, below the floor of 1099511627776 MiB"):
        parl.rlx.Client(address)


def test_a_silent_client_is_ended_after_the_idle_timeout_and_its_episode_ends_truncated(rlx_server) -> None:
    manager, address = rlx_server(slots=1, idle_timeout=0.3)
    client = parl.rlx.Client(address)
    client.init(rlx_obs(4, 0))
    client.send(1.0, rlx_obs(4, 1))
    time.sleep(0.6)
    with pytest.raises(ServerError) as info:
        client.send(1.0, rlx_obs(4, 2))
    assert info.value.code == TIMEOUT and info.value.message == "no request for 0.3 s"
    # The episode ended where the client went silent: truncated, the unanswered action scored 0.
    transition, over = stored(manager, 0, 2)[-1]
    assert over and float(transition.next_episode_end[0]) == 0.0 and float(transition.rewards["reward"][0]) == 0.0
    assert float(transition.next_inputs["obs"][0]) == 4001.0
    with parl.rlx.Client(address) as again:  # the slot is free; while the server answers, no clock runs
        assert play(again, code=5, steps=3) == 3.0
    assert manager.placement_metrics()[0][1]["rlx/timeouts"] == 1.0


def test_a_connection_without_hello_and_an_episode_too_long_time_out(rlx_server) -> None:
    _, address = rlx_server(slots=1, handshake_timeout=0.2, episode_timeout=0.4)
    silent = RawConnection(address)
    assert silent.read_all() == [{"type": "error", "code": TIMEOUT, "message": "no hello within 0.2 s"}]
    client = parl.rlx.Client(address)
    client.init(rlx_obs(1, 0))
    with pytest.raises(ServerError, match="timeout: an episode longer than 0.4 s"):
        for step in range(1, 10_000):
            client.send(1.0, rlx_obs(1, step))
            time.sleep(0.01)


def test_a_client_that_leaves_mid_episode_frees_its_slot_and_its_episode_ends_truncated(rlx_server) -> None:
    manager, address = rlx_server(slots=1)
    client = parl.rlx.Client(address)
    client.init(rlx_obs(6, 0))
    client.send(1.0, rlx_obs(6, 1))
    client.close()  # no bye
    with parl.rlx.Client(address) as next_client:
        assert play(next_client, code=7, steps=2) == 2.0
    episodes = [(t.inputs["obs"][0], t.next_inputs["obs"][0], over) for t, over in stored(manager, 0, 4)]
    assert episodes == [
        (6000.0, 6001.0, False),
        (6001.0, 6001.0, True),
        (7000.0, 7001.0, False),
        (7001.0, 7001.0, True),
    ]


HELLO = {"type": "hello", "version": 1}
INIT = {"type": "init", "obs": [1.0, 0.0]}


@pytest.mark.parametrize(
    "messages, code, text",
    [
        ([INIT], BAD_MESSAGE, "expected hello first, got init"),
        ([{"type": "hello", "version": 3}], VERSION, "this server speaks RLX versions 1 to 2, the client version 3"),
        ([HELLO, HELLO], BAD_MESSAGE, "hello was already said"),
        ([HELLO, {"type": "step", "reward": 1, "obs": [1.0, 0]}], BAD_MESSAGE, "step with no episode under way"),
        ([HELLO, {"type": "reset", "reward": 1}], BAD_MESSAGE, "reset with no episode under way"),
        ([HELLO, INIT, INIT], BAD_MESSAGE, "init before the answer to the last request (one at a time)"),
        ([HELLO, {"type": "init", "obs": [1.0, 0, 0]}], BAD_MESSAGE, "init: 'obs': expected shape [2], got [3]"),
        ([HELLO, {"type": "init", "obs": [float("nan"), 0]}], BAD_MESSAGE, "init: 'obs' holds nan at index (0,)"),
    ],
)
def test_a_request_out_of_order_or_out_of_its_space_ends_that_connection(rlx_server, messages, code, text) -> None:
    manager, address = rlx_server(slots=1)
    raw = RawConnection(address)
    raw.send_bytes(b"".join(encode(message) for message in messages))  # one write: read at once
    *answers, error = raw.read_all()
    assert (error["type"], error["code"]) == ("error", code) and error["message"].startswith(text)
    assert [a["type"] for a in answers] in ([], ["welcome"], ["welcome", "action"])
    with parl.rlx.Client(address) as client:  # the server goes on
        assert play(client, code=1, steps=2) == 2.0
    assert manager.errors == []


OBS64 = {"dtype": "float64", "shape": [2], "data": np.array([1e39, 0.0]).tobytes()}


@pytest.mark.parametrize(
    "messages, text",
    [
        (
            [HELLO, INIT, {"type": "step", "reward": 1e308, "obs": [1.0, 0]}],
            "step: reward 1e+308 is beyond max_abs_reward=1e+06",
        ),
        (
            [HELLO, INIT, {"type": "step", "reward": -3e38, "obs": [1.0, 0]}],
            "step: reward -3e+38 is beyond max_abs_reward",
        ),
        ([HELLO, INIT, {"type": "reset", "reward": 3.4e38}], "reset: reward 3.4e+38 is beyond max_abs_reward=1e+06"),
        ([HELLO, INIT, {"type": "reset", "reward": 1000000.5}], "reset: reward 1000000.5 is beyond max_abs_reward"),
        ([HELLO, {"type": "init", "obs": OBS64}], "init: 'obs' holds inf at index (0,) (not finite)"),
        (
            [HELLO, {"type": "init", "obs": [3e38, 0.0]}],
            "init: 'obs' holds 3e+38 at index (0,), beyond max_abs_observation=1e+06",
        ),
        (
            [HELLO, {"type": "init", "obs": [2e6, 0.0]}],
            "init: 'obs' holds 2e+06 at index (0,), beyond max_abs_observation",
        ),
        (
            [HELLO, INIT, {"type": "step", "reward": 1, "obs": [0.0, -1e30]}],
            "step: 'obs' holds -1e+30 at index (1,), beyond",
        ),
        ([HELLO, {"type": "metrics", "name": "x", "value": 1e308}], "metrics: value 1e+308 is not finite as float32"),
        (
            [HELLO, {"type": "metrics", "name": "x", "value": 1, "step": 2**63}],
            "metrics: step must be an integer in [0, 2**63 - 1]",
        ),
        (
            [HELLO, {"type": "metrics", "name": "x", "value": 1, "step": 2**64 - 1}],
            "metrics: step must be an integer in",
        ),
        ([HELLO, {"type": "metrics", "name": "x", "value": 1, "step": -1}], "metrics: step must be an integer in"),
        ([HELLO, {"type": "metrics", "name": "x", "value": 1, "step": 1.5}], "metrics: step must be an integer in"),
    ],
)
def test_values_beyond_what_the_robot_takes_end_the_connection_that_sent_them(rlx_server, messages, text) -> None:
    manager, address = rlx_server(slots=1)
    raw = RawConnection(address)
    *first, last = messages
    for message in first:  # each answered (hello, init) before the next
        raw.send(message)
        assert raw.read()["type"] in ("welcome", "action")
    raw.send(last)
    (error,) = raw.read_all()
    assert (error["type"], error["code"]) == ("error", BAD_MESSAGE) and error["message"].startswith(text), error
    with parl.rlx.Client(address) as client:  # the server goes on, and no bad value reached the robot
        client.metrics("x", 2.0, step=2**63 - 1)  # the largest step is taken (read before the answers)
        assert play(client, code=1, steps=3) == 3.0
    assert manager.errors == []
    assert all(abs(float(t.rewards["reward"][0])) <= 1.0 for t, _ in stored(manager, 0, 3))
    assert (2**63 - 1, {"client/x": 2.0}) in manager.placement_metrics()


def test_the_limits_on_rewards_and_observations_are_settings(rlx_server) -> None:
    _, address = rlx_server(slots=1, max_abs_reward=10.0, max_abs_observation=3.4e38)
    with parl.rlx.Client(address) as client:
        client.init(np.array([3e38, 0.0], np.float32))  # within float32: taken
        client.send(-10.0, rlx_obs(1, 1))  # at the limit: taken
        with pytest.raises(ServerError, match=r"bad_message: step: reward 10.5 is beyond max_abs_reward=10"):
            client.send(10.5, rlx_obs(1, 2))
    for bad in ({"max_abs_reward": 0.0}, {"max_abs_observation": 1e39}, {"max_abs_reward": float("nan")}):
        with pytest.raises(ParameterError, match=f"^{next(iter(bad))} must be"):
            ServerSettings(**bad)


def test_the_floats_of_an_action_taken_must_be_finite_as_float32() -> None:
    import gymnasium

    from parl.runtime.rlx.remote_env import RemoteEnv

    slot = RemoteEnv(0, SpacesEnv().observation_space, gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float64), server=None)
    assert slot.action_taken([3e38, -1.0], "step").tolist() == [3e38, -1.0]  # float64, within float32's range
    with pytest.raises(
        ProtocolError, match=r"^bad_message: step: 'action_taken' holds 1e\+308 at index \(0,\), beyond"
    ):
        slot.action_taken([1e308, 0.0], "step")


def test_log_lines_show_what_a_client_controls_escaped(rlx_server, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="parl.rlx")
    _, address = rlx_server(slots=1)
    raw = RawConnection(address)
    raw.send({"type": "hello", "version": 1, "client": "x\nparl: ERROR: forged\r\x1b[2K\u2028"})
    assert raw.read()["type"] == "welcome"
    raw.send({"type": "bye", "no\nparl: ERROR: forged": 1})
    assert raw.read_all()[0]["code"] == BAD_MESSAGE
    assert wait_for(
        lambda: any(record.name == "parl.rlx" for record in caplog.records)
    )  # logged once the error is sent
    lines = [record.getMessage() for record in caplog.records if record.name == "parl.rlx"]
    assert len(lines) == 1 and lines[0].isprintable(), lines
    assert "(x\\nparl: ERROR: forged\\r\\x1b[2K\\u2028), slot 0 ended (bad_message)" in lines[0]


def test_client_metrics_become_rows_at_their_step_or_the_robots(rlx_server) -> None:
    manager, address = rlx_server(slots=1)
    manager.placement_metrics()
    with parl.rlx.Client(address) as client:
        client.metrics("battery", 0.5, step=10)
        client.metrics("battery", 1.5, step=10)
        client.metrics("queue/depth", 3)
        play(client, code=1, steps=2)  # answered after the metrics were read
    rows = manager.placement_metrics()
    assert (10, {"client/battery": 1.0}) in rows and (None, {"client/queue/depth": 3.0}) in rows
    assert rows[0][1]["rlx/act_latency_ms"] > 0 and rows[0][1]["rlx/clients"] in (0.0, 1.0)


def test_metrics_beyond_the_rate_of_their_connection_are_dropped_and_counted(rlx_server) -> None:
    manager, address = rlx_server(slots=1, max_metrics_per_second=10)
    manager.placement_metrics()
    raw = RawConnection(address)
    assert raw.hello()["type"] == "welcome"
    flood = [{"type": "metrics", "name": "x", "value": 1.0, "step": step} for step in range(200)]
    raw.send_bytes(b"".join(encode(message) for message in [*flood, INIT]))
    assert raw.read()["type"] == "action"  # its request is still answered, once the metrics before it are read
    (_, server), *clients = manager.placement_metrics()
    taken = [step for step, row in clients if "client/x" in row]
    assert 10 <= len(taken) <= 12 and taken == sorted(taken)  # the burst, then a token a 0.1 s
    assert server["rlx/throttled_metrics"] == 200 - len(taken)
    raw.close()


def test_a_token_bucket_allows_its_rate_and_a_burst_of_as_many() -> None:
    from parl.runtime.rlx.rate import TokenBucket

    bucket = TokenBucket(rate=2.0, now=100.0)
    assert [bucket.take(100.0) for _ in range(3)] == [True, True, False]
    assert bucket.wait() == 0.5
    assert not bucket.take(100.25) and bucket.take(100.5)  # a token a half second
    assert bucket.take(110.0) and bucket.take(110.0) and not bucket.take(110.0)  # never more than the rate


def test_an_update_waits_only_for_the_segments_of_connected_clients(rlx_server) -> None:
    # A PPO-like robot: every update joins one segment of each of its 8 slots, waiting up to a minute.
    task = {"min_batchsize": 8, "max_training_batchsize": 8, "training_timeout": 60.0}
    manager, address = rlx_server(slots=8, task=task)
    wrapper = manager.wrappers["T"]
    assert wrapper.wanted_batches() == 1  # no client: at least one segment
    with parl.rlx.Client(address, timeout=WAIT) as client:  # a reply that waited a minute would time out
        assert wrapper.wanted_batches() == 1
        assert play(client, code=1, steps=9) == 9.0  # segments of 4: each update learns this client's alone
        assert manager.tasks["T"].update_steps >= 2
        with parl.rlx.Client(address, timeout=WAIT) as other:
            assert wrapper.wanted_batches() == 2
            assert play(other, code=2, steps=2) == 2.0  # its segment and the first client's go together
    assert wait_for(lambda: manager.runner.stats.clients == 0) and wrapper.wanted_batches() == 1
    assert manager.errors == []


def test_a_client_whose_slot_has_played_its_games_goes_on_in_a_free_slot(rlx_server, caplog) -> None:
    caplog.set_level(logging.INFO, logger="parl.rlx")
    manager, address = rlx_server(slots=2, games=1)
    client = parl.rlx.Client(address)
    assert client.slot == 0 and play(client, code=1, steps=3) == 3.0
    assert play(client, code=2, steps=2) == 2.0  # slot 0's agent has played its game: slot 1's plays this one
    with pytest.raises(ServerError, match=r"shutdown: slot 1 ended: its agent has played its games \(1\); no other"):
        client.init(rlx_obs(3, 0))
    # Every agent has played its games: the robot is done, and its server with it.
    assert wait_for(lambda: not manager.running())
    with pytest.raises(ConnectionRefusedError):
        parl.rlx.Client(address)
    assert sorted((e["agent_id"], e["steps"]) for e in manager.episodes()) == [(0, 3), (1, 2)]
    assert manager.errors == []
    lines = [r.getMessage() for r in caplog.records if r.name == "parl.rlx" and "slot" in r.getMessage()]
    assert "rlx: slot 0 ended: its agent has played its games (1)" in lines
    assert any(line.endswith(", slot 0 goes on in slot 1") for line in lines)
    assert "rlx: slot 1 ended: its agent has played its games (1)" in lines


def test_a_slot_whose_agent_fails_ends_its_client_saying_why(caplog) -> None:
    caplog.set_level(logging.INFO, logger="parl.rlx")
    manager = parl.Manager(
        {"RL": parl.TaskSettings(echo_algorithm_func())},
        placement=ServerSettings(bind="127.0.0.1:0"),
        thread_placement="os",
    )
    failing = FailingGymAgent(manager.environment(SpacesEnv), how="a list", fail_at=1)
    manager.add_agent(failing, {"RL": RecordingHelper()})
    manager.start()
    try:
        with parl.rlx.Client(rlx_address(manager)) as client:
            assert play(client, code=1, steps=2) == 2.0
            with pytest.raises(ServerError, match=r"^server error shutdown: slot 0 ended: its agent failed"):
                client.init(rlx_obs(1, 0))  # its episode 1 ends before it plays
    finally:
        manager.stop()
    assert len(manager.errors) == 1
    (record,) = [r for r in caplog.records if r.getMessage().startswith("rlx: slot 0 ended")]
    assert (
        record.levelno == logging.WARNING
        and "its agent failed (the robot's log holds its error)" in record.getMessage()
    )


def test_stopping_the_robot_tells_every_client(rlx_server, caplog) -> None:
    caplog.set_level(logging.INFO, logger="parl.rlx")
    manager, address = rlx_server(slots=2)
    client = parl.rlx.Client(address)
    client.init(rlx_obs(1, 0))
    manager.stop()
    with pytest.raises(ServerError) as info:
        client.send(1.0, rlx_obs(1, 1))
    assert info.value.code == SHUTDOWN
    assert "rlx: 2 slots end: the robot is stopping" in [r.getMessage() for r in caplog.records]
    assert parl.rlx.drive(_OneStepEnv(), _Closed(), episodes=3) == []  # drive returns on shutdown


class _OneStepEnv:
    def reset(self, seed=None):
        return rlx_obs(0, 0), {}


class _Closed:
    """A client whose server has stopped."""

    latency = 0.0

    def init(self, obs):
        raise ServerError(SHUTDOWN, "the server is stopping")


def test_client_metrics_wait_in_a_bounded_queue_and_the_dropped_are_counted() -> None:
    from parl.runtime.rlx.stats import MAX_CLIENT_METRICS, ServerStats

    stats = ServerStats()
    for value in range(MAX_CLIENT_METRICS + 5):
        stats.client_metric(None, "x", float(value))
    (_, row), (_, metrics) = stats.rows()
    assert row["rlx/dropped_metrics"] == 5.0
    assert metrics["client/x"] == (5 + MAX_CLIENT_METRICS + 4) / 2  # the mean of the last MAX_CLIENT_METRICS
    assert stats.rows() == [(None, {**row, "rlx/dropped_metrics": 0.0})]
