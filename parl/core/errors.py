"""Exceptions that cross thread boundaries in a robot."""

from __future__ import annotations

import traceback


class RemoteError(RuntimeError):
    """An exception raised in a wrapper thread, re-raised in the agent that sent the request.

    ``remote_traceback`` holds the original traceback text; it is also part of the message.
    """

    def __init__(self, where: str, original: BaseException) -> None:
        self.original = original
        self.remote_traceback = "".join(traceback.format_exception(type(original), original, original.__traceback__))
        super().__init__(f"{where} failed: {original!r}\n--- original traceback ---\n{self.remote_traceback}")


class AgentError(RuntimeError):
    """An agent's episode raised: which agent, which episode, and the traceback."""

    def __init__(self, agent_id: int, episode: int, original: BaseException) -> None:
        self.agent_id = agent_id
        self.episode = episode
        self.original = original
        self.traceback_text = "".join(traceback.format_exception(type(original), original, original.__traceback__))
        super().__init__(f"agent {agent_id} failed in episode {episode}: {original!r}\n{self.traceback_text}")


class StoppedError(RuntimeError):
    """Raised in an agent blocked on a request when the robot is stopped."""
