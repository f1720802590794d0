"""ProgressBar: a line redrawn in place on a terminal, plain lines every 10 s elsewhere."""

from __future__ import annotations

import io

import pytest

from parl.experiment.progress import PLAIN_INTERVAL, ProgressBar, format_duration


class FakeStream(io.StringIO):
    """A text stream that says whether it is a terminal."""

    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_terminal_line_is_redrawn_in_place_with_rate_return_and_time_left() -> None:
    stream, clock = FakeStream(tty=True), FakeClock()
    bar = ProgressBar(100, stream=stream, min_interval=0.5, clock=clock)
    bar.update(0, None)
    clock.now = 0.2
    bar.update(10, 5.0)  # within min_interval: not drawn
    clock.now = 1.0
    bar.update(50, 12.34, extra="eval 3.0")
    bar.close()
    output = stream.getvalue()
    assert "\n" not in output[:-1] and output.endswith("\n")
    frames = output[:-1].split("\r")[1:]
    assert len(frames) == 2
    assert "0/100" in frames[0] and "-- steps/s" in frames[0] and "return --" in frames[0]
    last = frames[1].rstrip()
    assert last.startswith("[##########..........]  50%  50/100")
    assert "50 steps/s" in last and "return 12.3" in last and "left 1s" in last and last.endswith("eval 3.0")


def test_a_shorter_line_blanks_the_rest_of_the_longer_one() -> None:
    stream, clock = FakeStream(tty=True), FakeClock()
    bar = ProgressBar(100, stream=stream, min_interval=0.0, clock=clock)
    bar.update(1, 1.0, extra="a long extra text")
    clock.now = 1.0
    bar.update(2, 1.0)
    first, second = stream.getvalue().split("\r")[1:]
    assert "extra" in first and "extra" not in second
    assert len(second) == len(first) and second.endswith(" ")


def test_reaching_the_budget_is_drawn_at_once() -> None:
    stream, clock = FakeStream(tty=True), FakeClock()
    bar = ProgressBar(100, stream=stream, clock=clock)
    bar.update(90, 1.0)
    clock.now = 0.1
    bar.update(100, 1.0)
    assert "100/100" in stream.getvalue() and "left 0s" in stream.getvalue()


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
    assert lines[1].startswith("[##..................]  10%  100/1,000")
    assert "100/1,000" in lines[1] and "10 steps/s" in lines[1]
    assert "240/1,000" in lines[3] and "left 1m16s" in lines[3]
    assert PLAIN_INTERVAL == 10.0


def test_durations_and_bad_settings() -> None:
    assert [format_duration(s) for s in (0.4, 45, 151, 3720, -3)] == ["0s", "45s", "2m31s", "1h02m", "0s"]
    with pytest.raises(ValueError, match="total_steps must be an integer >= 1, got 0"):
        ProgressBar(0)
    with pytest.raises(ValueError, match="min_interval"):
        ProgressBar(10, min_interval=-1.0)
