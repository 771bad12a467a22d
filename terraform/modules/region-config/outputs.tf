output "hosts" {
  description = <<-EOT
    Per host: its address and roles; files (each role's configuration, by
    absolute path); units (a systemd unit per role, by file name, for
    /etc/systemd/system); cloud_init (a #cloud-config document that
    installs the binary, mounts the disks, writes the files and units and
    starts them); commands (each role's command line, by role); ready_urls
    (each role's /readyz, by role).
  EOT
  value = { for h, v in var.hosts : h => {
    address    = v.address
    roles      = v.roles
    files      = { for r in v.roles : local.config_path[h][r] => local.configs[h][r] }
    units      = local.units[h]
    cloud_init = local.cloud_init[h]
    commands   = local.commands[h]
    ready_urls = local.ready_url[h]
  } }

  precondition {
    condition     = length(local.with.metastore) > 0 && length(local.with.metastore) % 2 == 1
    error_message = "a region needs an odd number of hosts with role metastore (its etcd cluster: 1, 3 or 5)."
  }
  precondition {
    condition     = length(local.with.bookie) >= var.ledger.ensemble_size
    error_message = "a region needs at least ledger.ensemble_size hosts with role bookie."
  }
  precondition {
    condition     = length(local.with.broker) > 0
    error_message = "a region needs at least one host with role broker."
  }
  precondition {
    condition     = !local.federated || (length(local.with.nats) > 0 && length(local.with.replicator) > 0)
    error_message = "a region of a federation (global_store.endpoints set) needs hosts with roles nats and replicator."
  }
  precondition {
    condition     = length(local.with.global) == 0 || (local.federated && var.global_store.initial_cluster != "")
    error_message = "hosts with role global need global_store.endpoints and global_store.initial_cluster."
  }
  precondition {
    condition     = alltrue([for m, u in local.global_peers : strcontains(var.global_store.initial_cluster, "${m}=${u}")])
    error_message = "global_store.initial_cluster must list each of this region's global members as <region>-<host>=http://<address>:<2480 + port_offset> (see the global_peers output)."
  }
  precondition {
    condition     = length(distinct([for h, v in var.hosts : "${v.address}:${v.port_offset}"])) == length(var.hosts)
    error_message = "two hosts share an address and port_offset: their ports would collide."
  }
}

output "configs" {
  description = "Each role's configuration file's content, by \"<host>/<role>\"."
  value       = merge([for h, v in var.hosts : { for r in v.roles : "${h}/${r}" => local.configs[h][r] }]...)
}

output "service_url" {
  description = "The region's Pulsar service URL (pulsar://...), for clients and the cluster record."
  value       = local.service_url
}

output "web_service_url" {
  description = "The region's admin REST URL (http://...)."
  value       = local.web_service_url
}

output "nats_url" {
  description = "The region's NATS servers' client URLs, comma-separated."
  value       = local.nats_url
}

output "nats_gateway_url" {
  description = "The gateway URL the other regions' NATS servers join (their peer_gateways entry for this region)."
  value       = local.nats_gateway_url
}

output "metastore_endpoints" {
  description = "The region's etcd client URLs."
  value       = local.metastore_endpoints
}

output "global_endpoints" {
  description = "Client URLs of this region's global configuration store members (hosts with role global)."
  value       = local.global_endpoints
}

output "global_peers" {
  description = "This region's global store members' peer URLs, by member name: the federation joins every region's into global_store.initial_cluster."
  value       = local.global_peers
}
