"""Fixtures of the container suite: the image (built once per session, cached by content
hash), and clusters that are always removed, also when the test fails.

Run it with ``bash scripts/test-containers.sh`` (installs Docker and debootstrap, starts the
engine, builds the image), or, with an engine running, ``pytest testcontainers_tests``.
"""

from __future__ import annotations

import os

# Read by testcontainers when it is imported: no Ryuk reaper container (no registry to pull
# it from); every fixture removes what it created itself.
os.environ["TESTCONTAINERS_RYUK_DISABLED"] = "true"

import sys
import tempfile
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from kafkaclone.testing.history import History

from . import cluster as containers
from .cluster import ContainerCluster, progress

RESULTS_DIR = Path(os.environ.get("KAFKACLONE_CONTAINER_RESULTS",
                                  Path(tempfile.gettempdir()) / "kafkaclone-container-results"))


def pytest_configure(config: pytest.Config) -> None:
    capture = config.pluginmanager.getplugin("capturemanager")

    def to_terminal(line: str) -> None:
        if capture is None:
            print(line, file=sys.stderr, flush=True)
            return
        with capture.global_and_fixture_disabled():
            print(line, file=sys.stderr, flush=True)

    containers.progress_sink = to_terminal


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[
        None, Any, None]:
    """Keep each phase's report on the test item, so fixtures know whether it failed."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


def _failed(request: pytest.FixtureRequest) -> bool:
    return any(getattr(getattr(request.node, f"report_{phase}", None), "failed", False)
               for phase in ("setup", "call"))


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[docker.DockerClient]:
    """The local Docker engine; an error (never a skip) when none answers."""
    client = containers.docker_client()
    try:
        client.ping()
    except docker.errors.DockerException as exc:
        raise RuntimeError("no Docker engine answers; run scripts/test-containers.sh, which "
                           "installs and starts one") from exc
    try:
        yield client
    finally:
        containers.remove_run_leftovers()
        containers.close_docker_client()


@pytest.fixture(scope="session")
def image(docker_engine: docker.DockerClient) -> str:
    """The test image's tag (built by scripts/build-test-image.sh; cached by content)."""
    progress("building the test image (cached when the code is unchanged)")
    tag = containers.build_image()
    progress(f"image {tag}")
    return tag


@pytest.fixture
def start_cluster(image: str, request: pytest.FixtureRequest) -> Iterator[
        Callable[..., ContainerCluster]]:
    """``start_cluster(num_brokers=3, zk_nodes=1, overrides={...})``: a started cluster,
    removed at the end of the test (its containers' last log lines shown if it failed)."""
    clusters: list[ContainerCluster] = []

    def start(num_brokers: int = 3, **kwargs: Any) -> ContainerCluster:
        cluster = ContainerCluster(image, num_brokers, **kwargs)
        clusters.append(cluster)
        return cluster.start()

    progress(f"--- {request.node.name}")
    try:
        yield start
    finally:
        for cluster in clusters:
            if _failed(request):
                cluster.dump_logs(150)
            cluster.close()
        progress(f"--- {request.node.name}: containers removed")


@pytest.fixture
def history(request: pytest.FixtureRequest) -> Iterator[History]:
    """The test's History, saved as JSON lines in RESULTS_DIR if it failed."""
    recorded = History()
    yield recorded
    if _failed(request):
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        path = RESULTS_DIR / f"{request.node.name}.history.jsonl"
        recorded.save(path)
        progress(f"history of the failed run saved in {path}")
