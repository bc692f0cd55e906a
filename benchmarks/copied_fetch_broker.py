"""Start a broker that serves Fetch without zero copy, for ``bench_broker.py --only
sendfile`` to compare with in the same run:

    copied_fetch_broker.py copied|bytes server.properties [kafka-server-start.sh arguments]

- ``copied``: the records are still read as ranges of the segment files, but the socket
  server reads them and writes the bytes (what a TLS connection does);
- ``bytes``: the path before zero-copy fetch: the log reads the records as bytes (with
  their CRCs checked) and the encoder copies them into the response frame.

Kafka has no switch for its zero-copy fetch (only TLS turns it off), so these are internal
defaults, set here before the broker starts.
"""

from __future__ import annotations

import sys

from kafkaclone.network.socket_server import KafkaServerFactory
from kafkaclone.server.handlers import fetch
from kafkaclone.tools.server_start import main

if __name__ == "__main__":
    mode, arguments = sys.argv[1], sys.argv[2:]
    if mode not in ("copied", "bytes"):
        sys.exit(f"unknown mode {mode!r}: copied or bytes")
    KafkaServerFactory.sendfile = False
    if mode == "bytes":
        fetch.FILE_REGIONS = False
    sys.exit(main(arguments))
