"""An installed Apache ZooKeeper: the JVM command line that runs it.

``find_java`` and ``find_classpath`` locate a JRE and a ZooKeeper distribution (Debian's
``zookeeper`` package, or a tarball pointed at by ``ZOOKEEPER_HOME``, or an explicit
``ZOOKEEPER_CLASSPATH``); ``MAIN_CLASS`` is ZooKeeper's own server entry point. The
``zookeeper-server-start.sh`` tool and the test support's ``ZooKeeperServer``
(kafkaclone.testing.zookeeper) both start ZooKeeper this way.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Final

MAIN_CLASS: Final = "org.apache.zookeeper.server.ZooKeeperServerMain"

# Debian's libzookeeper-java: the jar's manifest Class-Path names its dependencies.
_DEBIAN_JAR: Final = Path("/usr/share/java/zookeeper.jar")
# Any SLF4J binding makes ZooKeeper log (to stderr, which goes to the server's log file);
# without one it only prints SLF4J's "no binding" warning.
_DEBIAN_SLF4J_BINDING: Final = Path("/usr/share/java/slf4j-simple.jar")

DEFAULT_JVM_FLAGS: Final = (
    "-Xms32m",
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",  # a test server lives seconds: start fast, don't optimise
    "-Djava.awt.headless=true",
)


class ZooKeeperNotFoundError(RuntimeError):
    """No ZooKeeper installation or no java was found."""


def find_java() -> str:
    """``$JAVA_HOME/bin/java`` if set, else ``java`` on the PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise ZooKeeperNotFoundError(
            "java not found (set JAVA_HOME or install a JRE, e.g. apt-get install zookeeper)"
        )
    return found


def find_classpath() -> str:
    """The classpath of an installed ZooKeeper.

    In order: ``$ZOOKEEPER_CLASSPATH`` as given; ``$ZOOKEEPER_HOME`` (a release tarball:
    ``lib/*.jar`` and ``conf``); Debian's ``/usr/share/java/zookeeper.jar``.
    """
    explicit = os.environ.get("ZOOKEEPER_CLASSPATH")
    if explicit:
        return explicit
    home = os.environ.get("ZOOKEEPER_HOME")
    if home:
        jars = sorted(str(jar) for jar in (Path(home) / "lib").glob("*.jar"))
        if not jars:
            raise ZooKeeperNotFoundError(f"ZOOKEEPER_HOME={home} has no lib/*.jar")
        return os.pathsep.join([str(Path(home) / "conf"), *jars])
    if _DEBIAN_JAR.is_file():
        entries = [str(_DEBIAN_JAR)]
        if _DEBIAN_SLF4J_BINDING.is_file():
            entries.append(str(_DEBIAN_SLF4J_BINDING))
        return os.pathsep.join(entries)
    raise ZooKeeperNotFoundError(
        "ZooKeeper not found: install Debian's zookeeper package, or set ZOOKEEPER_HOME "
        "(a release directory) or ZOOKEEPER_CLASSPATH"
    )
