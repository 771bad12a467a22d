variable "region" {
  description = "The region's name: its cluster name in the federation (lower-case letters, digits and dashes)."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", var.region))
    error_message = "region must be lower-case letters, digits and dashes, at most 63, starting and ending with a letter or digit."
  }
}

variable "hosts" {
  description = <<-EOT
    The region's hosts, by a short name (letters, digits, dashes). Each runs
    the roles listed: metastore (a member of the region's etcd cluster),
    bookie, broker, nats, replicator, and global (a member of the
    federation's global configuration store). address is how the other
    hosts and clients reach the host. port_offset moves every port of the
    host's roles (several "hosts" on one machine). config_dir, data_dir,
    journal_dir and ledger_dir override the paths variable for this host.
    rack labels a bookie's failure domain.
  EOT
  type = map(object({
    address     = string
    roles       = list(string)
    listen_host = optional(string, "0.0.0.0")
    port_offset = optional(number, 0)
    rack        = optional(string, "")
    config_dir  = optional(string)
    data_dir    = optional(string)
    journal_dir = optional(string)
    ledger_dir  = optional(string)
  }))
  validation {
    condition     = alltrue([for k, h in var.hosts : can(regex("^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", k))])
    error_message = "host names must be lower-case letters, digits and dashes."
  }
  validation {
    condition = alltrue(flatten([for h in var.hosts : [
      for r in h.roles : contains(["metastore", "bookie", "broker", "nats", "replicator", "global"], r)
    ]]))
    error_message = "a host's roles must be among metastore, bookie, broker, nats, replicator and global."
  }
  validation {
    condition     = alltrue([for h in var.hosts : length(distinct(h.roles)) == length(h.roles) && length(h.roles) > 0])
    error_message = "each host needs at least one role, each listed once."
  }
  validation {
    condition     = alltrue([for h in var.hosts : h.port_offset >= 0 && h.port_offset < 50000 && floor(h.port_offset) == h.port_offset])
    error_message = "port_offset must be a whole number from 0 to 49999."
  }
}

variable "global_store" {
  description = <<-EOT
    The federation's global configuration store: its client endpoints
    (empty: a region alone, keeping clusters, tenants and namespaces in its
    own metadata store), and for the hosts with role "global" the store's
    initial cluster ("name=http://host:peerport,..."; a member is named
    <region>-<host>) and cluster token.
  EOT
  type = object({
    endpoints       = list(string)
    initial_cluster = optional(string, "")
    cluster_token   = optional(string, "isobar-global")
  })
  default = { endpoints = [] }
}

variable "peer_gateways" {
  description = "The other regions' NATS gateway URLs (\"nats://host:7222\"), by region name."
  type        = map(string)
  default     = {}
}

variable "service_url" {
  description = "The region's Pulsar service URL as clients and replicators use it (a load balancer); empty means every broker's, comma-separated."
  type        = string
  default     = ""
}

variable "web_service_url" {
  description = "The region's admin REST URL (a load balancer); empty means the first broker's."
  type        = string
  default     = ""
}

variable "ledger" {
  description = "The shape of new ledgers: ensemble size, write quorum and ack quorum (Pulsar's managedLedgerDefault*). The region needs at least ensemble_size bookies."
  type = object({
    ensemble_size = optional(number, 2)
    write_quorum  = optional(number, 2)
    ack_quorum    = optional(number, 2)
  })
  default = {}
  validation {
    condition     = var.ledger.ensemble_size >= var.ledger.write_quorum && var.ledger.write_quorum >= var.ledger.ack_quorum && var.ledger.ack_quorum >= 1
    error_message = "ledger needs ensemble_size >= write_quorum >= ack_quorum >= 1."
  }
}

variable "paths" {
  description = "Where things live on a host: the binary, the configuration files, and the data (each role under <data_dir>/<role>; a bookie's journal and ledgers under <data_dir>/journal and <data_dir>/ledgers unless a host says otherwise)."
  type = object({
    binary     = optional(string, "/usr/local/bin/isobar")
    config_dir = optional(string, "/etc/isobar")
    data_dir   = optional(string, "/var/lib/isobar")
  })
  default = {}
}

variable "binary_url" {
  description = "Where cloud-init downloads the isobar binary from (a static linux binary); empty leaves installing it to the image."
  type        = string
  default     = ""
}

variable "binary_sha256" {
  description = "The binary's SHA-256, checked by cloud-init after the download; empty checks nothing."
  type        = string
  default     = ""
}

variable "disks" {
  description = "Block devices cloud-init formats (ext4, if blank) and mounts, by host and mount point, e.g. { b1 = { \"/var/lib/isobar/journal\" = \"/dev/nvme1n1\" } }."
  type        = map(map(string))
  default     = {}
}

variable "user" {
  description = "The system user the services run as (cloud-init creates it)."
  type        = string
  default     = "isobar"
}

variable "shutdown_timeout_seconds" {
  description = "How long a process drains on SIGTERM before it stops at once (shutdownTimeout); systemd waits 10 s more before it kills."
  type        = number
  default     = 30
  validation {
    condition     = var.shutdown_timeout_seconds >= 1 && floor(var.shutdown_timeout_seconds) == var.shutdown_timeout_seconds
    error_message = "shutdown_timeout_seconds must be a whole number of seconds, at least 1."
  }
}

variable "auth" {
  description = <<-EOT
    Token authentication and authorization on the brokers (docs/security.md);
    null leaves them off. secret_key (HS256) or public_key (RS256, ES256) is
    the key brokers check tokens with, as the hosts see it (a path,
    file:///path or data:;base64,...); superuser_roles may do anything;
    the replicators authenticate with the token in replicator_token_file,
    whose role must be among replicator_roles. Installing the key and token
    files on the hosts is left to the caller (they are secrets; keep them
    out of user data).
  EOT
  type = object({
    secret_key            = optional(string, "")
    public_key            = optional(string, "")
    authorization         = optional(bool, true)
    superuser_roles       = optional(list(string), [])
    replicator_roles      = optional(list(string), ["replicator"])
    replicator_token_file = string
    authenticate_metrics  = optional(bool, false)
  })
  default = null
  validation {
    condition     = var.auth == null || (try(var.auth.secret_key, "") == "") != (try(var.auth.public_key, "") == "")
    error_message = "auth needs exactly one of secret_key and public_key."
  }
  validation {
    condition     = var.auth == null || length(try(var.auth.replicator_roles, [])) > 0
    error_message = "auth.replicator_roles must name the replicators' role."
  }
}

variable "tls" {
  description = <<-EOT
    TLS on the brokers (docs/security.md); null leaves it off. cert_file
    and key_file are the brokers' certificate and key as the hosts see
    them (one pair for every broker of the region: its names must cover
    each broker's address), trust_certs_file the CA bundle that clients'
    and brokers' certificates chain to. With it, brokers also listen on
    6651 (pulsar+ssl://) and 8443 (https://), plus port_offset, and the
    replicators reach them over TLS. Installing the files is the caller's.
  EOT
  type = object({
    cert_file           = string
    key_file            = string
    trust_certs_file    = string
    require_client_cert = optional(bool, false)
  })
  default = null
}
