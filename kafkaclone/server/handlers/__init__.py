"""One module per API handler, each registered with its version range (``registry``);
ApiVersions is computed from the registry. Handlers see the broker as
``kafkaclone.server.services.BrokerServices``."""
