"""Exceptions that cross thread boundaries in a robot."""

from __future__ import annotations

import traceback
from typing import Dict, List, Optional, Sequence

#: Longest description of an exception in a one-line summary.
BRIEF_CHARS = 300


class RemoteError(RuntimeError):
    """An exception raised in a wrapper thread, re-raised in the agent that sent the request.

    ``remote_traceback`` holds the original traceback text; it is also part of the message.
    """

    def __init__(self, where: str, original: BaseException, *, remote_traceback: Optional[str] = None) -> None:
        """``remote_traceback``: the original's traceback text, when it was raised in another process
        (None: formatted from ``original`` here)."""
        #: None for one re-raised in a worker process, which has the traceback text alone.
        self.original: Optional[BaseException] = original
        if remote_traceback is None:
            remote_traceback = "".join(traceback.format_exception(type(original), original, original.__traceback__))
        self.remote_traceback = remote_traceback
        super().__init__(f"{where} failed: {original!r}\n--- original traceback ---\n{self.remote_traceback}")


class EpisodeResultError(TypeError):
    """``run_one_episode`` returned something other than its statistics (see :meth:`parl.Agent.run_one_episode`)."""


class AgentError(RuntimeError):
    """An agent failed: which agent, in which episode, what it raised (or returned) and the traceback.

    Attributes:
        agent_id: the agent's id in its Manager.
        episode: the episode it was playing (episodes finished before it).
        original: what it raised (an :class:`EpisodeResultError` for a malformed result, a
            ``WorkerError`` for a worker process that died).
        where: the agent's call that raised (``"run_one_episode"``), or None when the error was not
            raised by the agent's code.
        traceback_text: the traceback of ``original`` (the worker side's, for worker processes).
        restart: 0 when the error ended the agent; n >= 1 when the agent was restarted for the n-th
            time instead (``restart_agents``: a fresh environment, the failed episode counted as over).
    """

    def __init__(
        self,
        agent_id: int,
        episode: int,
        original: BaseException,
        *,
        where: Optional[str] = None,
        traceback_text: Optional[str] = None,
        description: Optional[str] = None,
        restart: int = 0,
    ) -> None:
        self.restart = restart
        self.agent_id = agent_id
        self.episode = episode
        self.original = original
        self.where = where
        if traceback_text is None:
            traceback_text = "".join(traceback.format_exception(type(original), original, original.__traceback__))
        self.traceback_text = traceback_text
        #: ``original`` on one line (as :func:`brief`; for worker processes, as the worker saw it).
        self.description = brief(original) if description is None else description
        super().__init__(f"agent {agent_id} failed in episode {episode}: {original!r}\n{traceback_text}")

    @property
    def summary(self) -> str:
        """One line: ``agent 0, episode 3: SystemExit(0) raised in run_one_episode``."""
        raised = "" if self.where is None else f" raised in {self.where}"
        return f"agent {self.agent_id}, episode {self.episode}: {self.description}{raised}"


class AgentsFailedError(RuntimeError):
    """A run ended because agents failed; the message is one line (see :func:`failure_summary`).

    Attributes:
        errors: every agent error of the run, in the order they were reported.
        agents: how many agents the run had.
        result: the run's result as written to ``result.json`` (its final checkpoint included),
            when the run got that far; None otherwise.
    """

    def __init__(self, errors: Sequence[AgentError], agents: int, result: Optional[Dict[str, object]] = None) -> None:
        if not errors:
            raise ValueError("AgentsFailedError needs at least one AgentError, got none")
        self.errors: List[AgentError] = list(errors)
        self.agents = agents
        self.result = result
        super().__init__(failure_summary(self.errors, agents))


class StoppedError(RuntimeError):
    """Raised in an agent blocked on a request when the robot is stopped."""


def failure_summary(errors: Sequence[AgentError], agents: int) -> str:
    """One line about the failed agents among ``agents``: ``all 4 agents failed; first: agent 0,
    episode 3: SystemExit(0) raised in run_one_episode`` (or ``1 of 4 agents failed; first: ...``,
    ``the only agent failed: ...``)."""
    failed = len({error.agent_id for error in errors})
    first = errors[0].summary
    if agents == 1 and failed == 1:
        return f"the only agent failed: {first}"
    if failed >= agents:
        return f"all {agents} agents failed; first: {first}"
    return f"{failed} of {agents} agents failed; first: {first}"


def brief(exc: BaseException) -> str:
    """``exc`` on one line: ``SystemExit(0)``, ``KeyboardInterrupt()``, ``ValueError: bad obs``
    (the first line of the message, at most :data:`BRIEF_CHARS` characters)."""
    if not exc.args or not isinstance(exc.args[0], str):
        text = repr(exc)
    else:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        text = f"{type(exc).__name__}: {lines[0]}" if lines else f"{type(exc).__name__}()"
    text = " ".join(text.split())
    return text if len(text) <= BRIEF_CHARS else text[: BRIEF_CHARS - 3] + "..."
