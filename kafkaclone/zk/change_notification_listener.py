"""Kafka's ZkNodeChangeNotificationListener: follows a change-notification path
(``/config/changes``, ``/kafka-acl-changes``, ``/kafka-acl-extended-changes``).

Writers announce a change by creating a sequential znode ``<path>/<prefix><seq>``; every
broker processes each notification newer than the last one it processed, in sequence
order, and deletes notifications older than 15 minutes. A pass runs when the children
change and after every new ZooKeeper session; passes never overlap (one more runs after the
current one when notifications arrived meanwhile).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from kafkaclone.common.clock import Scheduler
from kafkaclone.common.errors import KafkaError
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.errors import ZNodeDecodeError
from kafkaclone.zk.zookeeper_client import StateChangeHandler, ZNodeChildChangeHandler

logger = logging.getLogger(__name__)

CHANGE_EXPIRATION_MS: Final = 15 * 60 * 1000
"""How long a notification stays (Kafka's default changeExpirationMs)."""


class ZkNodeChangeNotificationListener:
    """Calls ``process`` with the payload of each new notification under ``path``."""

    def __init__(self, zk_client: KafkaZkClient, clock: Scheduler, path: str, prefix: str,
                 process: Callable[[bytes], Awaitable[None]], *, name: str) -> None:
        self._zk = zk_client
        self._clock = clock
        self.path = path
        self._prefix = prefix
        self._process = process
        self.name = name
        self.last_executed_change = -1
        """The sequence number of the last notification processed."""
        self._running = False
        self._processing: Deferred[None] | None = None
        self._again = False
        listener = self

        class _Changes(ZNodeChildChangeHandler):
            def handle_child_change(self) -> None:
                listener.schedule()

        class _Session(StateChangeHandler):
            def after_initializing_session(self) -> None:
                listener.schedule()

        self._child_handler = _Changes(path)
        self._session_handler = _Session(name)

    async def startup(self) -> None:
        """Watch the path, then process what is there."""
        self._running = True
        self._zk.register_znode_child_change_handler(self._child_handler)
        self._zk.register_state_change_handler(self._session_handler)
        await self.process_notifications()

    def shutdown(self) -> None:
        self._running = False
        self._zk.unregister_znode_child_change_handler(self.path)
        self._zk.unregister_state_change_handler(self._session_handler.name)

    def schedule(self) -> None:
        """One pass at a time; another after it when more notifications arrived meanwhile."""
        if not self._running:
            return
        if self._processing is not None:
            self._again = True
            return
        self._processing = Deferred.fromCoroutine(self.process_notifications())

        def done(result: object) -> None:
            self._processing = None
            if self._again:
                self._again = False
                self.schedule()

        def failed(failure: Failure) -> None:
            if self._running:  # after shutdown the ZooKeeper session may be gone
                logger.error("Processing %s failed: %s", self.name, failure.getErrorMessage())

        self._processing.addErrback(failed)
        self._processing.addBoth(done)

    async def process_notifications(self) -> None:
        children = await self._zk.get_children(self.path, register_watch=True)
        now_ms = int(self._clock.seconds() * 1000)
        for child in sorted(children):
            if not child.startswith(self._prefix):
                continue
            try:
                sequence = int(child[len(self._prefix):])
            except ValueError:
                continue
            found = await self._zk.get_data_and_stat(f"{self.path}/{child}")
            if found is None:
                continue
            data, stat = found
            if sequence > self.last_executed_change:
                try:
                    await self._process(data)
                except (ZNodeDecodeError, KafkaError) as exc:
                    logger.error("Skipping %s notification %s: %s", self.name, child, exc)
                self.last_executed_change = sequence
            if int(stat.ctime) < now_ms - CHANGE_EXPIRATION_MS:
                await self._zk.delete_path(f"{self.path}/{child}")
