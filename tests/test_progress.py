"""ProgressBar: tqdm's line redrawn in place on a terminal, plain lines every 10 s elsewhere."""

from __future__ import annotations

import io

import pytest

from parl.experiment.train.progress import PLAIN_INTERVAL, ProgressBar

from toys import FakeClock


class FakeStream(io.StringIO):
    """A text stream that says whether it is a terminal."""

    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_terminal_line_is_redrawn_in_place_with_the_return_and_extra_text() -> None:
    stream = FakeStream(tty=True)
    bar = ProgressBar(100, stream=stream, min_interval=0.0)
    bar.update(0, None)
    bar.update(50, 12.34, extra="eval 3.0")
    bar.close()
    output = stream.getvalue()
    frames = [f for f in output.split("\r") if f.strip()]
    assert output.endswith("\n") and output[:-1].count("\n") == 0  # one line, redrawn
    assert any(" 0/100" in f and "return --" in f for f in frames)
    assert "50/100" in frames[-1] and "return 12.3  eval 3.0" in frames[-1] and " 50%" in frames[-1]


def test_reaching_the_budget_is_drawn_at_once() -> None:
    stream = FakeStream(tty=True)
    bar = ProgressBar(100, stream=stream, min_interval=60.0)
    bar.update(90, 1.0)
    bar.update(100, 1.0)
    assert "100/100" in stream.getvalue()
    bar.close()


def test_off_a_terminal_plain_lines_come_every_ten_seconds() -> None:
    stream, clock = FakeStream(tty=False), FakeClock()
    bar = ProgressBar(1000, stream=stream, min_interval=0.5, clock=clock)
    for second in range(25):
        clock.now = float(second)
        bar.update(10 * second, float("nan"))
    assert stream.getvalue().count("\n") == 3  # at 0, 10 and 20 s
    bar.close()  # the update at 24 s was not printed yet
    bar.close()
    bar.update(999, 1.0)  # after close: ignored
    lines = stream.getvalue().splitlines()
    assert len(lines) == 4 and "\r" not in stream.getvalue()
    assert "100/1000" in lines[1] and "10.00 steps/s" in lines[1] and "return --" in lines[1]
    assert "240/1000" in lines[3] and "<01:16" in lines[3]  # 760 steps left at 10 a second
    assert PLAIN_INTERVAL == 10.0


def test_off_a_terminal_the_budget_is_printed_at_once() -> None:
    stream, clock = FakeStream(tty=False), FakeClock()
    bar = ProgressBar(100, stream=stream, clock=clock)
    bar.update(10, 1.0)
    clock.now = 1.0
    bar.update(100, 2.0, extra="eval 9.0")
    assert stream.getvalue().splitlines()[-1].startswith("100%") and "eval 9.0" in stream.getvalue()


def test_bad_settings() -> None:
    with pytest.raises(ValueError, match="total_steps must be an integer >= 1, got 0"):
        ProgressBar(0)
    with pytest.raises(ValueError, match="min_interval"):
        ProgressBar(10, min_interval=-1.0)
