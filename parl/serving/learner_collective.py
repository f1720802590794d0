"""LearnerCollective: the sum across the learners of one task, through ``paddle.distributed``.

    collective = join_learner_group(LearnerAddress(rank, count, endpoints), device="cpu")  # per process
    task.join_learners(collective)
    costs = task.learn(batch)   # every learner, the same batch: each computes its share's gradient

Several learners of one task each hold a copy of it (the same initial weights).
Every optimizer step, each computes the gradient on its
:class:`~parl.core.row_share.RowShare` of the step's rows, the collective sums
the parts in place (one ``all_reduce`` of one flat buffer per step), and each
applies the same optimizer step, so the copies stay equal.

The sum is paddle's own collective: gloo between CPU processes, NCCL between
GPUs (one per learner). A process joins one group, once.
"""

from __future__ import annotations

import os
from typing import Dict, List, NamedTuple, Optional, Protocol, Sequence, Tuple, Union, cast

import numpy as np
import paddle

from parl.core.batch import Transition
from parl.core.row_share import RowShare

#: Where learners compute: "cpu", "gpu" (one GPU per learner; refused without them), "auto" (GPUs when there
#: are enough, else the CPU).
LEARNER_DEVICES = ("cpu", "gpu", "auto")


class LearnerCollective(Protocol):
    """What :meth:`ComputationTask.join_learners <parl.ComputationTask.join_learners>` needs: this
    learner's share of the rows and an in-place sum across the learners."""

    @property
    def share(self) -> RowShare: ...

    def sum_(self, tensor: paddle.Tensor) -> None:
        """Replace ``tensor`` by the sum of every learner's ``tensor`` (same shape on all)."""


class LearnerAddress(NamedTuple):
    """How learner ``rank`` of ``learners`` finds the others: ``endpoints`` is one ``host:port`` per
    learner plus the group's store last (``learners + 1`` in all, the same list for every learner)."""

    rank: int
    learners: int
    endpoints: Sequence[str]


class PaddleCollective:
    """:class:`LearnerCollective` over the group ``paddle.distributed.init_parallel_env`` made."""

    def __init__(self, share: RowShare) -> None:
        self._share = share

    @property
    def share(self) -> RowShare:
        """This learner's share of each step's rows."""
        return self._share

    def sum_(self, tensor: paddle.Tensor) -> None:
        """``tensor`` summed in place across the group (left as it is by a learner alone)."""
        if not self._share.whole:
            paddle.distributed.all_reduce(tensor)


def learner_device(device: str, count: int) -> str:
    """The paddle device of ``count`` learners asked for ``device`` ("cpu" or "gpu").

    Raises:
        ValueError: ``device`` is not one of :data:`LEARNER_DEVICES`, or "gpu" without a GPU per learner.
    """
    if device not in LEARNER_DEVICES:
        raise ValueError(f"learner device must be one of {list(LEARNER_DEVICES)}, got {device!r}")
    if device == "cpu":
        return device  # no GPU count asked for (it would start the CUDA driver before workers fork)
    gpus = paddle.device.cuda.device_count() if paddle.is_compiled_with_cuda() else 0
    if device == "gpu" and gpus < count:
        raise ValueError(f"learner device 'gpu' needs one GPU per learner: {count} learners, {gpus} GPUs here")
    if device == "auto":
        return "gpu" if gpus >= count else "cpu"
    return device


def join_learner_group(address: LearnerAddress, *, device: str = "cpu") -> PaddleCollective:
    """Join this process to the learner group at ``address`` (blocks until every learner has joined) and
    place paddle on ``device`` ("cpu", or "gpu": GPU ``rank``).

    Raises:
        ValueError: a bad rank, count, endpoint list or device.
    """
    share = RowShare.of(address.rank, address.learners)
    endpoints: List[str] = list(address.endpoints)
    if len(endpoints) != share.learners + 1:
        raise ValueError(f"learner endpoints must be {share.learners + 1} host:port entries, got {endpoints!r}")
    place = learner_device(device, share.learners)
    paddle.set_device(f"gpu:{share.rank}" if place == "gpu" else "cpu")
    os.environ.update(
        {
            "PADDLE_TRAINER_ID": str(share.rank),
            "PADDLE_TRAINERS_NUM": str(share.learners),
            "PADDLE_TRAINER_ENDPOINTS": ",".join(endpoints[:-1]),
            "PADDLE_CURRENT_ENDPOINT": endpoints[share.rank],
            "PADDLE_MASTER": endpoints[-1],
            "PADDLE_DISTRI_BACKEND": "nccl" if place == "gpu" else "gloo",
        }
    )
    if not share.whole:  # paddle makes no group of one
        paddle.distributed.init_parallel_env()
    return PaddleCollective(share)


def free_endpoints(count: int, host: str = "127.0.0.1") -> List[str]:
    """``count`` ``host:port`` addresses on ports free now (the caller's learners bind them soon after)."""
    import socket

    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [f"{host}:{sock.getsockname()[1]}" for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def batch_share(batch: Transition[np.ndarray], share: RowShare) -> Tuple[Transition[np.ndarray], int, int]:
    """``(rows, first, end)``: ``share``'s rows ``first:end`` of ``batch``, whole segments where the batch
    has them.

    Raises:
        ValueError: fewer rows (segments) than learners.
    """
    lengths = batch.sequence_lengths
    if lengths is None:
        first, end = share.rows(batch.batch_size)
        part_lengths = None
    else:
        first_segment, end_segment = share.segments(lengths)
        first, end = sum(lengths[:first_segment]), sum(lengths[:end_segment])
        part_lengths = tuple(lengths[first_segment:end_segment])
    part = batch.map_arrays(lambda array: array[first:end])._replace(sequence_lengths=part_lengths)
    return part, first, end


def sum_step(
    collective: LearnerCollective,
    parameters: Sequence[paddle.Tensor],
    values: Dict[str, Union[float, np.ndarray]],
    td_rows: Optional[Tuple[int, int]],
) -> Dict[str, Union[float, np.ndarray]]:
    """Sum one optimizer step's parts across the learners, in one ``all_reduce``: the parameters'
    gradients (in place) and the step's costs ``values`` (returned summed). Each learner's gradients
    and costs must already be its part of the whole (its share's mean times its share's fraction).

    A per-row ``td_error`` is put at rows ``td_rows = (first, total)`` of a zero array of the whole
    batch's rows before the sum, so every learner gets every row's.

    Raises:
        ValueError: a ``td_error`` without ``td_rows`` (an algorithm that shares its rows itself).
    """
    grads = [p.grad for p in parameters if p.grad is not None]
    names = [name for name in values if name != "td_error"]
    pieces = [g.reshape([-1]) for g in grads]
    pieces.append(paddle.to_tensor(np.array([values[name] for name in names], dtype=np.float32)))
    td_error = values.get("td_error")
    if td_error is not None:
        if td_rows is None:
            raise ValueError("a per-row 'td_error' needs the task to split the batch between learners")
        first, total = td_rows
        rows = np.zeros(total, dtype=np.float32)
        per_row = cast(np.ndarray, td_error)
        rows[first : first + len(per_row)] = per_row
        pieces.append(paddle.to_tensor(rows))
    buffer = paddle.concat(pieces)
    collective.sum_(buffer)
    chunks = paddle.split(buffer, [int(piece.shape[0]) for piece in pieces])
    with paddle.no_grad():
        for grad, chunk in zip(grads, chunks):
            paddle.assign(chunk.reshape(grad.shape), output=grad)
    summed: Dict[str, Union[float, np.ndarray]] = dict(zip(names, (float(v) for v in chunks[len(grads)].numpy())))
    if td_error is not None:
        summed["td_error"] = chunks[-1].numpy()
    return summed
