# tofu test: what the module renders for a three-host region of a
# federation, and the inputs it refuses. Run from the module's directory:
#   tofu init && tofu test

variables {
  region = "us-east"
  hosts = {
    m1 = { address = "10.0.1.10", roles = ["metastore", "global", "bookie", "nats"], rack = "a" }
    m2 = { address = "10.0.1.11", roles = ["metastore", "bookie", "broker"], rack = "b" }
    m3 = { address = "10.0.1.12", roles = ["metastore", "bookie", "broker", "nats", "replicator"], rack = "c", journal_dir = "/mnt/journal" }
  }
  global_store = {
    endpoints       = ["http://10.0.1.10:2479", "http://10.1.1.10:2479"]
    initial_cluster = "us-east-m1=http://10.0.1.10:2480,eu-west-m1=http://10.1.1.10:2480"
  }
  peer_gateways = { eu-west = "nats://10.1.1.10:7222" }
  binary_url    = "https://example.com/isobar"
  binary_sha256 = "0123456789abcdef"
  disks         = { m3 = { "/mnt/journal" = "/dev/sdf" } }
}

run "region" {
  command = plan

  assert {
    condition     = yamldecode(output.configs["m1/metastore"]).etcd.initialCluster == "us-east-m1=http://10.0.1.10:2380,us-east-m2=http://10.0.1.11:2380,us-east-m3=http://10.0.1.12:2380"
    error_message = "the region's etcd members must list each other"
  }
  assert {
    condition     = yamldecode(output.configs["m2/metastore"]).etcd.advertisePeerAddr == "10.0.1.11:2380" && yamldecode(output.configs["m2/metastore"]).etcd.clientAddr == "0.0.0.0:2379"
    error_message = "an etcd member listens on the wildcard and advertises its address"
  }
  assert {
    condition     = yamldecode(output.configs["m1/global"]).etcd.initialCluster == var.global_store.initial_cluster && yamldecode(output.configs["m1/global"]).etcd.clientAddr == "0.0.0.0:2479"
    error_message = "the global member joins the federation's store on its own ports"
  }
  assert {
    condition     = output.global_peers == { "us-east-m1" = "http://10.0.1.10:2480" } && output.global_endpoints == ["http://10.0.1.10:2479"]
    error_message = "global_peers names this region's global member"
  }
  assert {
    condition     = yamldecode(output.configs["m3/bookie"]).bookie.journalDir == "/mnt/journal" && yamldecode(output.configs["m2/bookie"]).bookie.ledgerDir == "/var/lib/isobar/ledgers"
    error_message = "bookie directories: a host's own, or under the data directory"
  }
  assert {
    condition     = yamldecode(output.configs["m2/bookie"]).bookie.advertiseAddr == "10.0.1.11:3181" && yamldecode(output.configs["m2/bookie"]).bookie.rack == "b"
    error_message = "a bookie advertises its address and rack"
  }
  assert {
    condition     = yamldecode(output.configs["m2/bookie"]).metastore.endpoints == ["http://10.0.1.10:2379", "http://10.0.1.11:2379", "http://10.0.1.12:2379"]
    error_message = "every role reaches the region's metastore members"
  }
  assert {
    condition     = yamldecode(output.configs["m2/broker"]).broker.name == "m2" && yamldecode(output.configs["m2/broker"]).broker.advertisedAddress == "10.0.1.11" && yamldecode(output.configs["m2/broker"]).global.endpoints == var.global_store.endpoints
    error_message = "a broker's name, advertised address and global store"
  }
  assert {
    condition     = yamldecode(output.configs["m3/broker"]).broker.ledger == { ensembleSize = 2, writeQuorum = 2, ackQuorum = 2 }
    error_message = "brokers shape ledgers as the ledger variable says"
  }
  assert {
    condition     = output.service_url == "pulsar://10.0.1.11:6650,10.0.1.12:6650" && output.web_service_url == "http://10.0.1.11:8080"
    error_message = "the region's service URLs are its brokers'"
  }
  assert {
    condition     = yamldecode(output.configs["m3/replicator"]).replicator.serviceUrl == output.service_url && yamldecode(output.configs["m3/replicator"]).replicator.natsUrl == "nats://10.0.1.10:4222,nats://10.0.1.12:4222"
    error_message = "the replicator reaches the region's brokers and NATS servers"
  }
  assert {
    condition     = yamldecode(output.configs["m1/nats"]).nats.gateways == var.peer_gateways && yamldecode(output.configs["m1/nats"]).nats.routes == ["nats://10.0.1.12:6222"] && yamldecode(output.configs["m1/nats"]).nats.gatewayAdvertise == "10.0.1.10:7222"
    error_message = "a NATS server joins the peer regions' gateways and its region's other servers"
  }
  assert {
    condition     = output.nats_gateway_url == "nats://10.0.1.10:7222"
    error_message = "the region's gateway URL for its peers"
  }
  assert {
    condition     = yamldecode(output.configs["m1/nats"]).shutdownTimeout == "30s"
    error_message = "every role drains within shutdown_timeout_seconds"
  }
  assert {
    condition     = output.hosts.m2.commands.broker == ["/usr/local/bin/isobar", "broker", "--config", "/etc/isobar/broker.yaml"] && output.hosts.m1.commands.global[1] == "metastore"
    error_message = "each role's command line reads its own file"
  }
  assert {
    condition     = keys(output.hosts.m1.files) == ["/etc/isobar/bookie.yaml", "/etc/isobar/global.yaml", "/etc/isobar/metastore.yaml", "/etc/isobar/nats.yaml"]
    error_message = "one configuration file per role of the host"
  }
  assert {
    condition     = strcontains(output.hosts.m2.units["isobar-broker.service"], "ExecStart=/usr/local/bin/isobar broker --config /etc/isobar/broker.yaml") && strcontains(output.hosts.m2.units["isobar-broker.service"], "TimeoutStopSec=40") && strcontains(output.hosts.m2.units["isobar-broker.service"], "RestartPreventExitStatus=2")
    error_message = "a unit runs its role, outlasts the drain and does not restart a bad configuration"
  }
  assert {
    condition     = startswith(output.hosts.m3.cloud_init, "#cloud-config\n")
    error_message = "cloud-init user data starts with #cloud-config"
  }
  assert {
    condition     = length(yamldecode(output.hosts.m3.cloud_init).write_files) == 10 && yamldecode(output.hosts.m3.cloud_init).write_files[0].content == output.hosts.m3.files["/etc/isobar/metastore.yaml"]
    error_message = "cloud-init writes each rendered file and unit, unchanged"
  }
  assert {
    condition     = yamldecode(output.hosts.m3.cloud_init).mounts == [["/dev/sdf", "/mnt/journal", "ext4", "defaults,nofail,noatime", "0", "2"]] && !can(yamldecode(output.hosts.m2.cloud_init).mounts)
    error_message = "cloud-init mounts a host's disks, and only its own"
  }
  assert {
    condition     = strcontains(yamldecode(output.hosts.m1.cloud_init).runcmd[0], "sha256sum -c") && yamldecode(output.hosts.m1.cloud_init).runcmd[4] == ["systemctl", "enable", "--now", "isobar-bookie.service", "isobar-global.service", "isobar-metastore.service", "isobar-nats.service"]
    error_message = "cloud-init checks the binary and starts every unit"
  }
}

run "region_alone" {
  command = plan
  variables {
    region       = "solo"
    hosts        = { a = { address = "192.168.0.5", roles = ["metastore", "bookie", "broker"], port_offset = 100 } }
    global_store = { endpoints = [] }
    ledger       = { ensemble_size = 1, write_quorum = 1, ack_quorum = 1 }
    disks        = {}
  }
  assert {
    condition     = !can(yamldecode(output.configs["a/broker"]).global) && yamldecode(output.configs["a/broker"]).broker.listenAddr == "0.0.0.0:6750"
    error_message = "a region alone has no global store; port_offset moves every port"
  }
  assert {
    condition     = output.hosts.a.ready_urls.broker == "http://192.168.0.5:8180/readyz" && output.hosts.a.ready_urls.bookie == "http://192.168.0.5:8100/readyz"
    error_message = "ready URLs follow the port plan"
  }
}

run "bad_region_name" {
  command = plan
  variables {
    region = "US_East"
  }
  expect_failures = [var.region]
}

run "bad_role" {
  command = plan
  variables {
    hosts = { a = { address = "10.0.0.1", roles = ["metastore", "zookeeper"] } }
  }
  expect_failures = [var.hosts]
}

run "even_metastore" {
  command = plan
  variables {
    hosts = {
      a = { address = "10.0.0.1", roles = ["metastore", "bookie", "broker", "nats", "replicator"] }
      b = { address = "10.0.0.2", roles = ["metastore", "bookie"] }
    }
  }
  expect_failures = [output.hosts]
}

run "too_few_bookies" {
  command = plan
  variables {
    hosts  = { a = { address = "10.0.0.1", roles = ["metastore", "bookie", "broker", "nats", "replicator"] } }
    ledger = { ensemble_size = 3, write_quorum = 2, ack_quorum = 2 }
  }
  expect_failures = [output.hosts]
}

run "bad_quorums" {
  command = plan
  variables {
    ledger = { ensemble_size = 2, write_quorum = 3, ack_quorum = 2 }
  }
  expect_failures = [var.ledger]
}

run "global_member_not_in_initial_cluster" {
  command = plan
  variables {
    global_store = {
      endpoints       = ["http://10.1.1.10:2479"]
      initial_cluster = "eu-west-m1=http://10.1.1.10:2480"
    }
  }
  expect_failures = [output.hosts]
}

run "federated_region_without_replicator" {
  command = plan
  variables {
    hosts = {
      m1 = { address = "10.0.1.10", roles = ["metastore", "bookie", "broker", "nats"] }
      m2 = { address = "10.0.1.11", roles = ["bookie"] }
    }
    global_store = { endpoints = ["http://10.9.9.9:2479"] }
  }
  expect_failures = [output.hosts]
}

run "colliding_hosts" {
  command = plan
  variables {
    hosts = {
      a = { address = "127.0.0.1", roles = ["metastore", "bookie", "broker", "nats", "replicator"] }
      b = { address = "127.0.0.1", roles = ["bookie"] }
    }
    global_store = { endpoints = [] }
  }
  expect_failures = [output.hosts]
}

run "with_auth" {
  command = plan
  variables {
    auth = {
      secret_key            = "file:///etc/isobar/secret.key"
      superuser_roles       = ["admin"]
      replicator_token_file = "/etc/isobar/replicator.token"
    }
  }
  assert {
    condition = yamldecode(output.configs["m2/broker"]).broker.auth == {
      authenticationEnabled = true, authorizationEnabled = true, authenticateMetrics = false
      token                 = { secretKey = "file:///etc/isobar/secret.key" }, superUserRoles = ["admin"], replicatorRoles = ["replicator"]
    }
    error_message = "brokers check tokens and permissions"
  }
  assert {
    condition     = yamldecode(output.configs["m3/replicator"]).replicator.tokenFile == "/etc/isobar/replicator.token"
    error_message = "replicators send their token"
  }
}

run "without_auth" {
  command = plan
  assert {
    condition     = !can(yamldecode(output.configs["m2/broker"]).broker.auth) && !can(yamldecode(output.configs["m3/replicator"]).replicator.tokenFile)
    error_message = "no auth settings unless asked"
  }
}

run "auth_with_two_keys" {
  command = plan
  variables {
    auth = { secret_key = "a", public_key = "b", replicator_token_file = "/t" }
  }
  expect_failures = [var.auth]
}

run "with_tls" {
  command = plan
  variables {
    tls = {
      cert_file        = "/etc/isobar/broker.pem"
      key_file         = "/etc/isobar/broker-key.pem"
      trust_certs_file = "/etc/isobar/ca.pem"
    }
  }
  assert {
    condition = yamldecode(output.configs["m2/broker"]).broker.tls == {
      certFile = "/etc/isobar/broker.pem", keyFile = "/etc/isobar/broker-key.pem", trustCertsFile = "/etc/isobar/ca.pem", requireClientCert = false
    } && yamldecode(output.configs["m2/broker"]).broker.tlsListenAddr == "0.0.0.0:6651" && yamldecode(output.configs["m2/broker"]).broker.httpsListenAddr == "0.0.0.0:8443"
    error_message = "brokers serve TLS on 6651 and 8443"
  }
  assert {
    condition     = yamldecode(output.configs["m3/replicator"]).replicator.serviceUrl == "pulsar+ssl://10.0.1.11:6651,10.0.1.12:6651" && yamldecode(output.configs["m3/replicator"]).replicator.tlsTrustCertsFile == "/etc/isobar/ca.pem"
    error_message = "replicators reach the brokers over TLS"
  }
}
