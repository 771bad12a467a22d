# Renders one region of an Isobar federation: every role's configuration
# file (docs/config.md's shape, one file per role and host), a systemd unit
# per role, and a cloud-init document per host that installs all of it.
# No provider and no resources: everything is in the outputs.

locals {
  roles = ["metastore", "global", "bookie", "broker", "nats", "replicator"]

  # The command each role runs (the global store's members are etcd
  # members like the region's own).
  command = {
    metastore  = "metastore"
    global     = "metastore"
    bookie     = "bookie"
    broker     = "broker"
    nats       = "nats"
    replicator = "replicator"
  }

  # Each role's ports before a host's port_offset: the upstream projects'
  # defaults where they have one (etcd, BookKeeper, Pulsar, NATS).
  base_ports = {
    metastore  = { client = 2379, peer = 2380, http = 2381 }
    global     = { client = 2479, peer = 2480, http = 2481 }
    bookie     = { listen = 3181, http = 8000 }
    broker     = { pulsar = 6650, http = 8080, pulsar_tls = 6651, https = 8443 }
    nats       = { client = 4222, gateway = 7222, cluster = 6222, http = 8222 }
    replicator = { http = 8090 }
  }

  ports = { for h, v in var.hosts : h => {
    for r, ps in local.base_ports : r => { for n, p in ps : n => p + v.port_offset }
  } }

  addr       = { for h, v in var.hosts : h => v.address }
  listen     = { for h, v in var.hosts : h => v.listen_host }
  config_dir = { for h, v in var.hosts : h => coalesce(v.config_dir, var.paths.config_dir) }
  data_dir   = { for h, v in var.hosts : h => coalesce(v.data_dir, var.paths.data_dir) }

  # The hosts of each role, in name order.
  with = { for r in local.roles : r => sort([for h, v in var.hosts : h if contains(v.roles, r)]) }

  metastore_endpoints = [for h in local.with.metastore : "http://${local.addr[h]}:${local.ports[h].metastore.client}"]
  metastore_initial   = join(",", [for h in local.with.metastore : "${var.region}-${h}=http://${local.addr[h]}:${local.ports[h].metastore.peer}"])

  tls_on           = var.tls != null
  broker_addrs     = [for h in local.with.broker : "${local.addr[h]}:${local.ports[h].broker.pulsar}"]
  broker_tls_addrs = [for h in local.with.broker : "${local.addr[h]}:${local.ports[h].broker.pulsar_tls}"]
  # The replicators' way to the brokers: TLS when the brokers serve it.
  replicator_service_url = local.tls_on && var.service_url == "" ? "pulsar+ssl://${join(",", local.broker_tls_addrs)}" : local.service_url
  service_url            = var.service_url != "" ? var.service_url : (length(local.broker_addrs) > 0 ? "pulsar://${join(",", local.broker_addrs)}" : "")
  web_service_url        = var.web_service_url != "" ? var.web_service_url : (length(local.with.broker) > 0 ? "http://${local.addr[local.with.broker[0]]}:${local.ports[local.with.broker[0]].broker.http}" : "")

  nats_url         = join(",", [for h in local.with.nats : "nats://${local.addr[h]}:${local.ports[h].nats.client}"])
  nats_gateway_url = length(local.with.nats) > 0 ? "nats://${local.addr[local.with.nats[0]]}:${local.ports[local.with.nats[0]].nats.gateway}" : ""
  nats_routes      = { for h in local.with.nats : h => "nats://${local.addr[h]}:${local.ports[h].nats.cluster}" }

  global_endpoints = [for h in local.with.global : "http://${local.addr[h]}:${local.ports[h].global.client}"]
  global_peers     = { for h in local.with.global : "${var.region}-${h}" => "http://${local.addr[h]}:${local.ports[h].global.peer}" }

  federated = length(var.global_store.endpoints) > 0

  # Sections shared by several roles.
  metastore_section = { endpoints = local.metastore_endpoints }
  # (Optional sections and keys are filtered with for expressions: a
  # conditional's two objects would need one type.)
  global_section = { for k, s in { global = { endpoints = var.global_store.endpoints } } : k => s if local.federated }
  common         = { shutdownTimeout = "${var.shutdown_timeout_seconds}s" }

  # The brokers' auth section and the replicators' token, when auth is on.
  auth_on = var.auth != null
  broker_auth = { for k, x in {
    auth = {
      authenticationEnabled = true
      authorizationEnabled  = try(var.auth.authorization, true)
      token = merge(
        { for k2, key in { secretKey = try(var.auth.secret_key, "") } : k2 => key if key != "" },
        { for k2, key in { publicKey = try(var.auth.public_key, "") } : k2 => key if key != "" },
      )
      superUserRoles      = try(var.auth.superuser_roles, [])
      replicatorRoles     = try(var.auth.replicator_roles, [])
      authenticateMetrics = try(var.auth.authenticate_metrics, false)
    }
  } : k => x if local.auth_on }
  replicator_auth = { for k, x in { tokenFile = try(var.auth.replicator_token_file, "") } : k => x if local.auth_on }
  replicator_tls  = { for k, x in { tlsTrustCertsFile = try(var.tls.trust_certs_file, "") } : k => x if local.tls_on }

  # Every role's configuration, by host and role.
  settings = { for h, v in var.hosts : h => { for r in v.roles : r => merge(local.common, {
    metastore = {
      etcd = {
        name                = "${var.region}-${h}"
        dataDir             = "${local.data_dir[h]}/metastore"
        clientAddr          = "${local.listen[h]}:${local.ports[h].metastore.client}"
        peerAddr            = "${local.listen[h]}:${local.ports[h].metastore.peer}"
        advertiseClientAddr = "${local.addr[h]}:${local.ports[h].metastore.client}"
        advertisePeerAddr   = "${local.addr[h]}:${local.ports[h].metastore.peer}"
        initialCluster      = local.metastore_initial
        clusterToken        = "isobar-${var.region}"
        httpAddr            = "${local.listen[h]}:${local.ports[h].metastore.http}"
      }
    }
    global = {
      etcd = {
        name                = "${var.region}-${h}"
        dataDir             = "${local.data_dir[h]}/global"
        clientAddr          = "${local.listen[h]}:${local.ports[h].global.client}"
        peerAddr            = "${local.listen[h]}:${local.ports[h].global.peer}"
        advertiseClientAddr = "${local.addr[h]}:${local.ports[h].global.client}"
        advertisePeerAddr   = "${local.addr[h]}:${local.ports[h].global.peer}"
        initialCluster      = var.global_store.initial_cluster
        clusterToken        = var.global_store.cluster_token
        httpAddr            = "${local.listen[h]}:${local.ports[h].global.http}"
      }
    }
    bookie = {
      metastore = local.metastore_section
      bookie = merge({
        id            = "${var.region}-${h}"
        region        = var.region
        listenAddr    = "${local.listen[h]}:${local.ports[h].bookie.listen}"
        advertiseAddr = "${local.addr[h]}:${local.ports[h].bookie.listen}"
        journalDir    = coalesce(v.journal_dir, "${local.data_dir[h]}/journal")
        ledgerDir     = coalesce(v.ledger_dir, "${local.data_dir[h]}/ledgers")
        httpAddr      = "${local.listen[h]}:${local.ports[h].bookie.http}"
      }, { for k, x in { rack = v.rack } : k => x if x != "" })
    }
    broker = merge(local.global_section, {
      metastore = local.metastore_section
      broker = merge(local.broker_auth, { for k, x in {
        tls = {
          certFile          = try(var.tls.cert_file, "")
          keyFile           = try(var.tls.key_file, "")
          trustCertsFile    = try(var.tls.trust_certs_file, "")
          requireClientCert = try(var.tls.require_client_cert, false)
        }
        tlsListenAddr   = "${local.listen[h]}:${local.ports[h].broker.pulsar_tls}"
        httpsListenAddr = "${local.listen[h]}:${local.ports[h].broker.https}"
        } : k => x if local.tls_on }, {
        region            = var.region
        name              = h
        listenAddr        = "${local.listen[h]}:${local.ports[h].broker.pulsar}"
        httpListenAddr    = "${local.listen[h]}:${local.ports[h].broker.http}"
        advertisedAddress = local.addr[h]
        dataDir           = "${local.data_dir[h]}/broker"
        ledger = {
          ensembleSize = var.ledger.ensemble_size
          writeQuorum  = var.ledger.write_quorum
          ackQuorum    = var.ledger.ack_quorum
        }
      })
    })
    nats = {
      nats = merge({
        region           = var.region
        name             = "${var.region}-${h}"
        host             = local.listen[h]
        port             = local.ports[h].nats.client
        gatewayPort      = local.ports[h].nats.gateway
        gatewayAdvertise = "${local.addr[h]}:${local.ports[h].nats.gateway}"
        httpAddr         = "${local.listen[h]}:${local.ports[h].nats.http}"
        },
        { for k, x in { gateways = var.peer_gateways } : k => x if length(x) > 0 },
        { for k, x in {
          clusterPort = local.ports[h].nats.cluster
          routes      = [for o, u in local.nats_routes : u if o != h]
      } : k => x if length(local.with.nats) > 1 })
    }
    replicator = merge(local.global_section, {
      metastore = local.metastore_section
      replicator = merge(local.replicator_auth, local.replicator_tls, {
        region     = var.region
        id         = h
        serviceUrl = local.replicator_service_url
        natsUrl    = local.nats_url
        dataDir    = "${local.data_dir[h]}/replicator"
        httpAddr   = "${local.listen[h]}:${local.ports[h].replicator.http}"
      })
    })
  }[r]) } }

  config_path = { for h, v in var.hosts : h => { for r in v.roles : r => "${local.config_dir[h]}/${r}.yaml" } }

  configs = { for h, v in var.hosts : h => { for r in v.roles : r => join("", [
    "# Isobar ${r} of region ${var.region}, host ${h}: rendered by terraform/modules/region-config.\n",
    "# Read by: ${var.paths.binary} ${local.command[r]} --config ${local.config_path[h][r]}\n",
    yamlencode(local.settings[h][r]),
  ]) } }

  commands = { for h, v in var.hosts : h => { for r in v.roles : r => [var.paths.binary, local.command[r], "--config", local.config_path[h][r]] } }

  # The URL whose 2xx says a role is ready (docs/operations.md).
  ready_url = { for h, v in var.hosts : h => { for r in v.roles : r => "http://${local.addr[h]}:${r == "broker" ? local.ports[h].broker.http : local.ports[h][r].http}/readyz" } }

  units = { for h, v in var.hosts : h => { for r in v.roles : "isobar-${r}.service" => templatefile("${path.module}/templates/unit.tftpl", {
    role       = r
    region     = var.region
    user       = var.user
    exec       = join(" ", local.commands[h][r])
    stop_after = var.shutdown_timeout_seconds + 10
  }) } }

  data_dirs = { for h, v in var.hosts : h => distinct(concat(
    [for r in v.roles : "${local.data_dir[h]}/${r}" if r != "bookie"],
    contains(v.roles, "bookie") ? [local.settings[h].bookie.bookie.journalDir, local.settings[h].bookie.bookie.ledgerDir] : [],
  )) }

  cloud_init = { for h, v in var.hosts : h => join("", ["#cloud-config\n", yamlencode(merge(
    {
      users = ["default", { name = var.user, system = true, shell = "/usr/sbin/nologin", homedir = local.data_dir[h] }]
      write_files = concat(
        [for r in v.roles : { path = local.config_path[h][r], permissions = "0644", content = local.configs[h][r] }],
        [for u, c in local.units[h] : { path = "/etc/systemd/system/${u}", permissions = "0644", content = c }],
      )
      runcmd = concat(
        var.binary_url == "" ? [] : [
          join(" && ", concat(
            ["curl -fsSL --retry 5 -o ${var.paths.binary}.download '${var.binary_url}'"],
            var.binary_sha256 == "" ? [] : ["echo '${var.binary_sha256}  ${var.paths.binary}.download' | sha256sum -c -"],
            ["chmod 0755 ${var.paths.binary}.download", "mv ${var.paths.binary}.download ${var.paths.binary}"],
          )),
        ],
        [concat(["mkdir", "-p"], local.data_dirs[h])],
        [concat(["chown", "-R", "${var.user}:${var.user}"], local.data_dirs[h])],
        [["systemctl", "daemon-reload"]],
        [concat(["systemctl", "enable", "--now"], [for u in keys(local.units[h]) : u])],
      )
    },
    { for k, x in {
      fs_setup = [for m, d in lookup(var.disks, h, {}) : { device = d, filesystem = "ext4", overwrite = false }]
      mounts   = [for m, d in lookup(var.disks, h, {}) : [d, m, "ext4", "defaults,nofail,noatime", "0", "2"]]
    } : k => x if length(lookup(var.disks, h, {})) > 0 },
  ))]) }
}
