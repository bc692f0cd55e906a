"""``KAFKACLONE_LOG_LEVEL``: a root level and per-logger levels, checked before the broker
starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkaclone.tools.server_start import main, parse_log_levels


@pytest.mark.timeout(10)
def test_a_root_level_alone() -> None:
    assert parse_log_levels("debug") == ("DEBUG", {})
    assert parse_log_levels("") == ("INFO", {})


@pytest.mark.timeout(10)
def test_per_logger_levels_follow_the_root() -> None:
    root, loggers = parse_log_levels(
        "INFO, kafkaclone.coordinator.transaction=debug,kazoo=WARNING")
    assert root == "INFO"
    assert loggers == {"kafkaclone.coordinator.transaction": "DEBUG", "kazoo": "WARNING"}


@pytest.mark.timeout(10)
@pytest.mark.parametrize("spec", ["LOUD", "INFO,kafkaclone=", "INFO,kafkaclone=verbose"])
def test_a_part_that_is_not_a_level_is_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="is not a log level"):
        parse_log_levels(spec)


@pytest.mark.timeout(10)
def test_the_broker_refuses_to_start_with_a_bad_level(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text("broker.id=1\nzookeeper.connect=127.0.0.1:1\n")
    monkeypatch.setenv("KAFKACLONE_LOG_LEVEL", "INFO,kafkaclone=verbose")
    assert main([str(properties)]) == 1
    assert capsys.readouterr().err.strip() == \
        "KAFKACLONE_LOG_LEVEL: 'VERBOSE' is not a log level"
