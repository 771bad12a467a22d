# A federation of three regions on this machine, the whole chain for real:
# the region-config module renders every role's configuration, each role
# runs as an `isobar` process of its own (start.sh, stop.sh), and the Isobar
# provider then makes a tenant, a namespace replicated to every region and
# a topic. Each region is one "host" (127.0.0.1 with a port offset) running
# an etcd member, a bookie, a broker, a NATS server and a replicator; the
# first region's host also runs the global configuration store.
#
#   go build -o /tmp/isobar ./cmd/isobar
#   bash scripts/tofu-mirror.sh && export TF_CLI_CONFIG_FILE=$PWD/.bin/tofurc
#   cd terraform/examples/local-federation
#   tofu init && tofu apply -var isobar_binary=/tmp/isobar
#   tofu destroy -var isobar_binary=/tmp/isobar   # stops every process
#
# Data, logs and pid files go under run_dir (default ./run).

terraform {
  required_providers {
    isobar = {
      source = "isobar-mq/isobar"
    }
  }
}

variable "isobar_binary" {
  description = "The isobar binary the processes run (an absolute path)."
  type        = string
  validation {
    condition     = startswith(var.isobar_binary, "/")
    error_message = "isobar_binary must be an absolute path."
  }
}

variable "run_dir" {
  description = "Where each region's configuration, data, logs and pid files go; empty means ./run next to this file."
  type        = string
  default     = ""
}

variable "regions" {
  description = "The regions, in order; the first also runs the global configuration store."
  type        = list(string)
  default     = ["us-east", "eu-west", "ap-south"]
  validation {
    condition     = length(var.regions) >= 1 && length(distinct(var.regions)) == length(var.regions)
    error_message = "regions must name at least one region, each once."
  }
}

variable "port_offsets" {
  description = "Each region's port offset (added to every default port: Pulsar 6650 + offset, admin 8080 + offset, ...). The defaults keep every port below Linux's ephemeral range."
  type        = list(number)
  default     = [11000, 17000, 23000]
  validation {
    condition     = alltrue([for o in var.port_offsets : o >= 0 && o <= 50000])
    error_message = "port offsets must be from 0 to 50000."
  }
}

locals {
  run_dir = var.run_dir != "" ? var.run_dir : "${abspath(path.root)}/run"
  offset  = { for i, r in var.regions : r => var.port_offsets[i] }
  first   = var.regions[0]

  # The global store is one member, on the first region's host. Its
  # addresses follow the module's port plan (global client 2479, peer 2480).
  global_store = {
    endpoints       = ["http://127.0.0.1:${2479 + local.offset[local.first]}"]
    initial_cluster = "${local.first}-node=http://127.0.0.1:${2480 + local.offset[local.first]}"
  }
}

module "region" {
  source   = "../../modules/region-config"
  for_each = local.offset

  region = each.key
  hosts = {
    node = {
      address     = "127.0.0.1"
      listen_host = "127.0.0.1"
      port_offset = each.value
      roles       = concat(["metastore", "bookie", "broker", "nats", "replicator"], each.key == local.first ? ["global"] : [])
      config_dir  = "${local.run_dir}/${each.key}/config"
      data_dir    = "${local.run_dir}/${each.key}/data"
    }
  }
  global_store = local.global_store
  # Every other region's gateway (NATS port 7222 + offset); computed here
  # rather than from the other module instances' outputs, which would make
  # the module depend on itself.
  peer_gateways = { for r, o in local.offset : r => "nats://127.0.0.1:${7222 + o}" if r != each.key }
  # One bookie per region: every entry once.
  ledger                   = { ensemble_size = 1, write_quorum = 1, ack_quorum = 1 }
  paths                    = { binary = var.isobar_binary }
  shutdown_timeout_seconds = 20
}

locals {
  # Every process: its region, role, command, configuration and the files
  # start.sh and stop.sh keep. (A destroy-time provisioner sees only its
  # resource's own input, so the scripts' paths are in it too.)
  processes = merge([for r, m in module.region : { for role, argv in m.hosts.node.commands : "${r}/${role}" => {
    role      = role
    argv      = argv
    config    = m.configs["node/${role}"]
    path      = argv[3]
    ready_url = m.hosts.node.ready_urls[role]
    pid_file  = "${local.run_dir}/${r}/${role}.pid"
    log_file  = "${local.run_dir}/${r}/${role}.log"
    start     = "${abspath(path.module)}/start.sh"
    stop      = "${abspath(path.module)}/stop.sh"
  } }]...)

  tier = {
    metastore  = "stores"
    global     = "stores"
    bookie     = "servers"
    nats       = "servers"
    broker     = "brokers"
    replicator = "replicators"
  }
}

# The processes, started in the order docs/operations.md gives (each waits
# for its /readyz) and stopped in the reverse order on destroy. A changed
# configuration replaces (restarts) its process.
resource "terraform_data" "stores" {
  for_each = { for k, p in local.processes : k => p if local.tier[p.role] == "stores" }
  input    = each.value
  provisioner "local-exec" {
    command     = join(" ", concat([self.input.start, self.input.path, self.input.pid_file, self.input.log_file, self.input.ready_url, "--"], self.input.argv))
    environment = { CONFIG = self.input.config }
  }
  provisioner "local-exec" {
    when    = destroy
    command = "${self.input.stop} ${self.input.pid_file}"
  }
}

resource "terraform_data" "servers" {
  for_each   = { for k, p in local.processes : k => p if local.tier[p.role] == "servers" }
  depends_on = [terraform_data.stores]
  input      = each.value
  provisioner "local-exec" {
    command     = join(" ", concat([self.input.start, self.input.path, self.input.pid_file, self.input.log_file, self.input.ready_url, "--"], self.input.argv))
    environment = { CONFIG = self.input.config }
  }
  provisioner "local-exec" {
    when    = destroy
    command = "${self.input.stop} ${self.input.pid_file}"
  }
}

resource "terraform_data" "brokers" {
  for_each   = { for k, p in local.processes : k => p if local.tier[p.role] == "brokers" }
  depends_on = [terraform_data.servers]
  input      = each.value
  provisioner "local-exec" {
    command     = join(" ", concat([self.input.start, self.input.path, self.input.pid_file, self.input.log_file, self.input.ready_url, "--"], self.input.argv))
    environment = { CONFIG = self.input.config }
  }
  provisioner "local-exec" {
    when    = destroy
    command = "${self.input.stop} ${self.input.pid_file}"
  }
}

resource "terraform_data" "replicators" {
  for_each   = { for k, p in local.processes : k => p if local.tier[p.role] == "replicators" }
  depends_on = [terraform_data.brokers]
  input      = each.value
  provisioner "local-exec" {
    command     = join(" ", concat([self.input.start, self.input.path, self.input.pid_file, self.input.log_file, self.input.ready_url, "--"], self.input.argv))
    environment = { CONFIG = self.input.config }
  }
  provisioner "local-exec" {
    when    = destroy
    command = "${self.input.stop} ${self.input.pid_file}"
  }
}

# Once every process serves: the regions have registered their clusters;
# make a tenant, a namespace replicated to every region and a topic.
provider "isobar" {
  web_service_url = [for r in var.regions : module.region[r].web_service_url]
}

data "isobar_cluster" "region" {
  for_each   = toset(var.regions)
  depends_on = [terraform_data.replicators]
  name       = each.key
}

resource "isobar_tenant" "demo" {
  depends_on       = [terraform_data.replicators]
  name             = "demo"
  allowed_clusters = var.regions
}

resource "isobar_namespace" "events" {
  tenant               = isobar_tenant.demo.name
  name                 = "events"
  replication_clusters = var.regions
}

resource "isobar_topic" "clicks" {
  tenant    = isobar_namespace.events.tenant
  namespace = isobar_namespace.events.name
  name      = "clicks"
}

output "regions" {
  description = "Each region's service URLs and registered cluster record."
  value = { for r in var.regions : r => {
    service_url     = module.region[r].service_url
    web_service_url = module.region[r].web_service_url
    cluster         = data.isobar_cluster.region[r].broker_service_url
  } }
}

output "topic" {
  description = "The replicated topic: produce in any region, consume in any other."
  value       = isobar_topic.clicks.id
}

output "files" {
  description = "Every configuration file the processes read, by path, as the module rendered it."
  value       = { for k, p in local.processes : p.path => p.config }
}

output "processes" {
  description = "Every process's pid file, by region/role."
  value       = { for k, p in local.processes : k => p.pid_file }
}
