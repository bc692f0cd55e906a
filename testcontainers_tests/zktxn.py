"""ZooKeeper's own record of every write, read back for the fencing assertions.

``ZooKeeperNode.transaction_log()`` dumps the server's transaction log with ZooKeeper's
``TxnLogToolkit``; ``parse`` turns that dump into ``Txn`` objects (zxid, session, and the
operations with the paths and payloads they wrote). The checks below answer questions that
znode stats alone cannot, because they see every intermediate write, not only the last:

- ``controller_epoch_writes``: each value ``/controller_epoch`` was set to, in zxid order;
- ``writes_by``: the writes a set of sessions made after a zxid (fencing: none expected);
- ``partition_state_anomalies``: leader elections written under a controller epoch that was
  no longer current, two leaders for one partition in one leader epoch, or a partition's
  controller epoch going backwards;
- ``foreign_controller_writes``: a controller write (a multi guarded by a check of
  ``/controller_epoch``) from any session but the one that set the current epoch: two
  controllers acting.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_HEADER = re.compile(
    r"^\S+, \S+ [AP]M \S+ session 0x(?P<session>[0-9a-f]+) cxid 0x[0-9a-f]+ "
    r"zxid 0x(?P<zxid>[0-9a-f]+) (?P<kind>\w+)(?P<body>.*)$")
_PATH = re.compile(r"/[A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-]+)*")
_STATE_PATH = re.compile(r"^/brokers/topics/(?P<topic>[^/]+)/partitions/(?P<partition>\d+)/state$")

WRITE_KINDS = frozenset({"create", "create2", "createContainer", "createTTL", "setData",
                         "delete", "deleteContainer"})


@dataclass
class Op:
    kind: str  # create, setData, delete, check, error...
    path: str | None
    body: str

    def json(self) -> Any:
        """The JSON object the op wrote (None if it wrote none). The dump shows a payload
        after its 4-byte length, which may itself read as a ``{``: try each start."""
        start = self.body.find("{")
        while start >= 0:
            depth = 0
            for index in range(start, len(self.body)):
                char = self.body[index]
                if char == "{":
                    depth += 1
                elif char == "}":
                    depth -= 1
                    if depth == 0:
                        try:
                            return json.loads(self.body[start:index + 1])
                        except ValueError:
                            break
            start = self.body.find("{", start + 1)
        return None

    def integer(self) -> int | None:
        """An ASCII integer payload (``/controller_epoch``), right after the path."""
        if self.path is None:
            return None
        rest = self.body[self.body.find(self.path) + len(self.path):]
        # "create /p,0,..." in a plain create; path, 4-byte length, value inside a multi.
        match = re.match(r"[\x00-\x1f\s,]*?(\d+)", rest)
        return int(match.group(1)) if match else None


@dataclass
class Txn:
    zxid: int
    session: int
    kind: str
    ops: list[Op] = field(default_factory=list)

    @property
    def writes(self) -> list[Op]:
        """The operations that changed a znode (a failed multi changes nothing)."""
        return [op for op in self.ops if op.kind in WRITE_KINDS]


def _split_ops(kind: str, body: str) -> list[Op]:
    if kind != "multi":
        path = _PATH.search(body)
        return [Op(kind, path.group(0) if path else None, body)]
    ops = []
    for part in body.split(";"):
        name, _, rest = part.strip().partition(":")
        path = _PATH.search(rest)
        ops.append(Op(name.strip(), path.group(0) if path else None, rest))
    if any(op.kind == "error" for op in ops):  # a failed multi: nothing of it applied
        return [Op("error", None, body)]
    return ops


def parse(lines: list[str]) -> list[Txn]:
    """The dump's transactions in zxid order (ZooKeeper's own log lines are skipped; an
    operation's payload may continue on the next lines)."""
    raw: list[tuple[int, int, str, list[str]]] = []
    for line in lines:
        header = _HEADER.match(line)
        if header:
            raw.append((int(header["zxid"], 16), int(header["session"], 16), header["kind"],
                        [header["body"]]))
        elif raw and not line.startswith(("[", "ZooKeeper Transactional Log", "EOF reached")):
            raw[-1][3].append(line)
    txns = [Txn(zxid, session, kind, _split_ops(kind, "\n".join(body)))
            for zxid, session, kind, body in raw]
    return sorted(txns, key=lambda txn: txn.zxid)


def controller_epoch_writes(txns: list[Txn]) -> list[tuple[int, int]]:
    """(zxid, value) of every write of /controller_epoch."""
    found = []
    for txn in txns:
        for op in txn.writes:
            if op.path == "/controller_epoch":
                value = op.integer()
                if value is not None:
                    found.append((txn.zxid, value))
    return found


def sessions_registering(txns: list[Txn], broker_id: int) -> set[int]:
    """Every session that created ``/brokers/ids/<broker_id>``: that broker's sessions."""
    path = f"/brokers/ids/{broker_id}"
    return {txn.session for txn in txns
            for op in txn.writes if op.kind.startswith("create") and op.path == path}


def writes_by(txns: list[Txn], sessions: set[int], after_zxid: int,
              allowed_paths: frozenset[str] = frozenset()) -> list[tuple[int, str, str]]:
    """(zxid, op, path) of each write by ``sessions`` after ``after_zxid`` outside
    ``allowed_paths``."""
    return [(txn.zxid, op.kind, op.path or "?") for txn in txns
            if txn.zxid > after_zxid and txn.session in sessions
            for op in txn.writes if op.path not in allowed_paths]


def partition_state_anomalies(txns: list[Txn]) -> list[str]:
    """What the partition state znodes' history must never show (see the module doc)."""
    problems: list[str] = []
    current_epoch: int | None = None
    last: dict[str, dict[str, Any]] = {}
    leader_of_epoch: dict[tuple[str, int], int] = {}
    for txn in txns:
        for op in txn.writes:
            if op.path == "/controller_epoch":
                current_epoch = op.integer()
                continue
            if op.path is None or not _STATE_PATH.match(op.path) or op.kind == "delete":
                continue
            state = op.json()
            if state is None:
                problems.append(f"zxid {txn.zxid:#x}: unreadable state write {op.body!r}")
                continue
            before = last.get(op.path)
            epoch, leader = int(state["leader_epoch"]), int(state["leader"])
            elected = before is None or epoch > int(before["leader_epoch"])
            if elected and state["controller_epoch"] != current_epoch:
                problems.append(
                    f"zxid {txn.zxid:#x}: {op.path} elected leader {leader} (leader epoch "
                    f"{epoch}) under controller epoch {state['controller_epoch']}, but the "
                    f"current controller epoch was {current_epoch}")
            if before is not None and epoch < int(before["leader_epoch"]):
                problems.append(f"zxid {txn.zxid:#x}: {op.path} leader epoch went back from "
                                f"{before['leader_epoch']} to {epoch}")
            if before is not None and state["controller_epoch"] < before["controller_epoch"]:
                problems.append(f"zxid {txn.zxid:#x}: {op.path} controller epoch went back "
                                f"from {before['controller_epoch']} to "
                                f"{state['controller_epoch']}")
            known = leader_of_epoch.setdefault((op.path, epoch), leader)
            if known != leader and leader >= 0 and known >= 0:
                problems.append(f"zxid {txn.zxid:#x}: {op.path} has two leaders, {known} and "
                                f"{leader}, in leader epoch {epoch}")
            last[op.path] = state
    return problems


def merge(*logs: list[Txn]) -> list[Txn]:
    """One history from several ensemble members' logs (a member that was down while others
    committed may have caught up from a snapshot, so its own log has gaps)."""
    by_zxid: dict[int, Txn] = {}
    for txns in logs:
        for txn in txns:
            by_zxid.setdefault(txn.zxid, txn)
    return [by_zxid[zxid] for zxid in sorted(by_zxid)]


def foreign_controller_writes(txns: list[Txn]) -> list[str]:
    """Controller writes not made by the session that set the current controller epoch."""
    problems: list[str] = []
    controller_session: int | None = None
    for txn in txns:
        writes = txn.writes
        if any(op.path == "/controller_epoch" for op in writes):
            controller_session = txn.session
            continue
        guarded = any(op.kind == "check" and op.path == "/controller_epoch" for op in txn.ops)
        if guarded and writes and txn.session != controller_session:
            paths = ", ".join(op.path or "?" for op in writes)
            problems.append(f"zxid {txn.zxid:#x}: session {txn.session:#x} wrote {paths} as "
                            f"controller; the controller's session was {controller_session!r}")
    return problems
