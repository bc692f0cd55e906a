"""``format("kafkaclone")`` without ``register(spark)``, from a directory that is not the
repository, after an editable install and after a wheel install.

PySpark finds Python data sources by scanning ``pkgutil.iter_modules()`` for top-level
``pyspark_*`` modules, so ``pyspark_kafkaclone`` must be a file in a ``sys.path`` directory
in both install modes (a meta path finder, as setuptools' default editable install uses for
flat layouts, imports it but hides it from that scan).

Each install goes into a fresh virtual environment built with pip's ``--python`` (so nothing
is installed into or removed from the project's own venv); pyspark, pyarrow and the other
dependencies come from the project's venv through a ``.pth`` line added after the install.
The job runs in a temporary directory with that venv's python, for the driver and for the
executors, with no PYTHONPATH: the repository is nowhere on its path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkaclone.testing.cluster import LocalCluster

pytestmark = pytest.mark.timeout(600)

REPO = Path(__file__).resolve().parents[2]
PROJECT_FILES = ["setup.cfg", "pyproject.toml", "README.md", "pyspark_kafkaclone.py", "kafkaclone"]

JOB = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession

    bootstrap, topic = sys.argv[1], sys.argv[2]
    spark = (SparkSession.builder.master("local[1]").appName("install-check")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    (spark.range(50).selectExpr("CAST(id AS STRING) AS key", "CAST(id * 2 AS STRING) AS value")
     .write.format("kafkaclone")
     .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
     .mode("append").save())
    rows = (spark.read.format("kafkaclone")
            .option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
            .load().selectExpr("CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v")
            .collect())
    import kafkaclone
    print("kafkaclone from", kafkaclone.__file__)
    print("rows", sorted((int(r.k), int(r.v)) for r in rows) == [(i, 2 * i) for i in range(50)])
    spark.stop()
    """
)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(1, overrides={"auto.create.topics.enable": "true"}) as local:
        yield local


def copy_project(dest: Path) -> Path:
    """The files a build needs, so that building writes nothing into the repository."""
    dest.mkdir()
    for name in PROJECT_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, dest / name)
    return dest


def new_venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True,
                   timeout=120)
    return path / "bin" / "python"


def pip_install(python: Path, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--quiet", *args],
        check=True, timeout=300,
    )


def add_dependencies(python: Path) -> None:
    """Append the project venv's site-packages (pyspark, pyarrow, ...) to the new venv's
    path. Its own kafkaclone (an editable finder .pth) is not processed: a directory named
    in a .pth file is added to sys.path, its .pth files are not read."""
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout.strip()
    Path(site, "project-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")


def run_job(python: Path, cwd: Path, bootstrap: str, topic: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK"))}
    env.update(PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python),
               SPARK_LOCAL_IP="127.0.0.1")
    (cwd / "job.py").write_text(JOB)
    result = subprocess.run(
        [str(python), "job.py", bootstrap, topic], cwd=cwd, env=env, capture_output=True,
        text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_editable_install_finds_the_format(cluster: LocalCluster, tmp_path: Path) -> None:
    project = copy_project(tmp_path / "project")
    python = new_venv(tmp_path / "venv")
    pip_install(python, "--editable", str(project))
    add_dependencies(python)
    workdir = tmp_path / "work"
    workdir.mkdir()
    out = run_job(python, workdir, cluster.bootstrap_servers, "editable")
    assert f"kafkaclone from {project / 'kafkaclone' / '__init__.py'}" in out
    assert "rows True" in out


def test_wheel_install_finds_the_format(cluster: LocalCluster, tmp_path: Path) -> None:
    project = copy_project(tmp_path / "project")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w",
         str(tmp_path / "dist"), str(project)],
        check=True, timeout=300,
    )
    (wheel,) = (tmp_path / "dist").glob("kafkaclone-*.whl")
    python = new_venv(tmp_path / "venv")
    pip_install(python, str(wheel))
    add_dependencies(python)
    workdir = tmp_path / "work"
    workdir.mkdir()
    out = run_job(python, workdir, cluster.bootstrap_servers, "wheel")
    assert "kafkaclone from " + str(tmp_path / "venv") in out
    assert "rows True" in out
