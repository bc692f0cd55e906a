"""Authentication on the broker: the security config keys, their resolution per listener
(TLS material, SASL mechanisms and JAAS), the SCRAM credential cache fed from ZooKeeper."""
