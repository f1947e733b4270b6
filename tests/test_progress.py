"""The progress bar: silent for short runs and off a terminal."""

from __future__ import annotations

import pytest

from fabricsim.progress import ProgressBar


def test_silent_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    with ProgressBar(delay_s=0.0) as bar:
        bar(0.5)
    assert capsys.readouterr().err == ""


def test_silent_before_the_delay(capsys: pytest.CaptureFixture[str]) -> None:
    with ProgressBar(delay_s=60.0, force=True) as bar:
        bar(0.5)
    assert capsys.readouterr().err == ""


def test_shows_simulated_time_after_the_delay(capsys: pytest.CaptureFixture[str]) -> None:
    with ProgressBar(delay_s=0.0, force=True) as bar:
        bar(0.25)
        bar(2.0)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "100%" in captured.err
