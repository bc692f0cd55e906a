"""Authorization: Kafka's AclAuthorizer over ACLs stored in ZooKeeper."""
