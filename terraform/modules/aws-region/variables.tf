variable "region" {
  description = "The Isobar region's name: its cluster name in the federation (lower-case letters, digits and dashes, e.g. the AWS region's name). Independent of the AWS region, which is the provider's."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", var.region))
    error_message = "region must be lower-case letters, digits and dashes, at most 63, starting and ending with a letter or digit."
  }
}

variable "vpc_id" {
  description = "The VPC the region runs in."
  type        = string
}

variable "vpc_cidr" {
  description = "The VPC's CIDR: the region's hosts accept every Isobar port from it (and the load balancer's health checks come from it)."
  type        = string
  validation {
    condition     = can(cidrhost(var.vpc_cidr, 0))
    error_message = "vpc_cidr must be an IPv4 CIDR block."
  }
}

variable "subnets" {
  description = <<-EOT
    The subnets the hosts are spread over (round robin, by role), with
    their CIDRs, from which every host's fixed private address is computed
    (see address_block), and optionally their availability zones (a
    bookie's rack; empty uses the subnet's id). One subnet per
    availability zone; the load balancer gets a node in each. Each must be
    a /25 or larger.
  EOT
  type = list(object({
    id   = string
    cidr = string
    az   = optional(string, "")
  }))
  validation {
    condition     = length(var.subnets) > 0
    error_message = "at least one subnet is needed."
  }
  validation {
    condition     = alltrue([for s in var.subnets : can(cidrhost(s.cidr, 0)) && can(tonumber(split("/", s.cidr)[1])) && try(tonumber(split("/", s.cidr)[1]) <= 25, false)])
    error_message = "each subnet's cidr must be an IPv4 CIDR block of prefix length 25 or less (at least 128 addresses)."
  }
}

variable "address_block" {
  description = <<-EOT
    Which /26 (64 addresses) of each subnet the hosts' fixed private
    addresses are taken from: its index among the subnet's /26 blocks (1:
    x.x.x.64-127 of a /24). Within it, by role: metastore hosts 4-9, NATS
    10-13, replicators 14-17, brokers 18-31, bookies 32-62. With
    reserve_address_block the block is reserved in the subnet (an explicit
    subnet CIDR reservation) so that AWS never gives its addresses to
    anything else (the load balancer's nodes, other instances).
  EOT
  type        = number
  default     = 1
  validation {
    condition     = var.address_block >= 0 && floor(var.address_block) == var.address_block
    error_message = "address_block must be a whole number from 0."
  }
}

variable "reserve_address_block" {
  description = "Reserve the address block in every subnet (aws_ec2_subnet_cidr_reservation, type explicit). Turn off when the block is already kept free otherwise."
  type        = bool
  default     = true
}

variable "ami_id" {
  description = "The hosts' image: a Linux with cloud-init (e.g. Amazon Linux 2023, whose udev rules name EBS volumes by their device name on Nitro instances too; see bookie_volumes)."
  type        = string
}

variable "key_name" {
  description = "An EC2 key pair for SSH; null (the default) sets none."
  type        = string
  default     = null
}

variable "iam_instance_profile" {
  description = "An instance profile for the hosts (e.g. for SSM or CloudWatch); null sets none."
  type        = string
  default     = null
}

variable "instance_types" {
  description = "Instance types by role."
  type = object({
    metastore  = optional(string, "m6i.large")
    bookie     = optional(string, "i4i.large")
    broker     = optional(string, "c6i.xlarge")
    nats       = optional(string, "c6i.large")
    replicator = optional(string, "c6i.large")
  })
  default = {}
}

variable "counts" {
  description = "How many hosts of each role: metastore 3 or 5 (an etcd cluster), bookies at least ledger.ensemble_size, brokers and NATS servers at least 1, replicator workers 0 (a region outside a federation) or more."
  type = object({
    metastore  = optional(number, 3)
    bookie     = optional(number, 3)
    broker     = optional(number, 2)
    nats       = optional(number, 1)
    replicator = optional(number, 2)
  })
  default = {}
  validation {
    condition     = contains([1, 3, 5, 7], var.counts.metastore)
    error_message = "counts.metastore must be 1, 3, 5 or 7 (an etcd cluster of an odd size)."
  }
  validation {
    condition     = alltrue([for k, v in var.counts : v >= 0 && floor(v) == v]) && var.counts.broker >= 1 && var.counts.nats >= 1 && var.counts.bookie >= 1
    error_message = "counts must be whole numbers, with at least one bookie, one broker and one NATS server."
  }
  validation {
    condition = alltrue([for role, slots in { metastore = 6, nats = 4, replicator = 4, broker = 14, bookie = 31 } :
    ceil(var.counts[role] / length(var.subnets)) <= slots])
    error_message = "too many hosts of a role for the subnets' address blocks: per subnet at most 6 metastore hosts, 4 NATS servers, 4 replicators, 14 brokers and 31 bookies (see address_block)."
  }
}

variable "ledger" {
  description = "The shape of new ledgers (passed to region-config): ensemble size, write quorum and ack quorum. The region needs at least ensemble_size bookies."
  type = object({
    ensemble_size = optional(number, 2)
    write_quorum  = optional(number, 2)
    ack_quorum    = optional(number, 2)
  })
  default = {}
  validation {
    condition     = var.counts.bookie >= var.ledger.ensemble_size
    error_message = "counts.bookie must be at least ledger.ensemble_size: a ledger is written to that many bookies."
  }
}

variable "root_volume" {
  description = "Every host's root volume."
  type = object({
    size = optional(number, 20)
    type = optional(string, "gp3")
  })
  default = {}
}

variable "bookie_volumes" {
  description = <<-EOT
    Each bookie's two EBS volumes, attached at launch: the journal and the
    ledger storage, each on its own device. device_name is the name EC2
    attaches it under (/dev/sdf, /dev/sdg); os_device is the path
    cloud-init formats and mounts. On Xen instances the kernel names them
    /dev/xvdf and /dev/xvdg; on Nitro instances they are NVMe devices
    (/dev/nvme1n1, /dev/nvme2n1, in no guaranteed order) and the
    /dev/sdf and /dev/sdg names exist only where the image's udev rules
    create them from the volume's NVMe vendor data (Amazon Linux 2 and
    2023 do, through amazon-ec2-utils): the default os_device relies on
    that; with another image give a path it creates.
    delete_on_termination: the volumes go with the instance (a replaced
    bookie host is a new bookie; decommission the old one).
  EOT
  type = object({
    journal = optional(object({
      device_name = optional(string, "/dev/sdf")
      os_device   = optional(string, "/dev/sdf")
      size        = optional(number, 50)
      type        = optional(string, "gp3")
      iops        = optional(number)
      throughput  = optional(number)
    }), {})
    ledger = optional(object({
      device_name = optional(string, "/dev/sdg")
      os_device   = optional(string, "/dev/sdg")
      size        = optional(number, 500)
      type        = optional(string, "gp3")
      iops        = optional(number)
      throughput  = optional(number)
    }), {})
    encrypted             = optional(bool, true)
    delete_on_termination = optional(bool, true)
  })
  default = {}
  validation {
    condition     = var.bookie_volumes.journal.device_name != var.bookie_volumes.ledger.device_name && var.bookie_volumes.journal.os_device != var.bookie_volumes.ledger.os_device
    error_message = "the journal and the ledger storage need two different devices."
  }
}

variable "data_dir" {
  description = "Where the hosts keep their data; a bookie's journal and ledger volumes are mounted at <data_dir>/journal and <data_dir>/ledgers."
  type        = string
  default     = "/var/lib/isobar"
}

variable "binary_url" {
  description = "Where cloud-init downloads the isobar binary from (a static linux/amd64 or arm64 binary matching the instance types)."
  type        = string
  validation {
    condition     = can(regex("^(https?|s3)://", var.binary_url))
    error_message = "binary_url must be an http(s):// or s3:// URL."
  }
}

variable "binary_sha256" {
  description = "The binary's SHA-256, checked after the download; empty checks nothing."
  type        = string
  default     = ""
  validation {
    condition     = var.binary_sha256 == "" || can(regex("^[0-9a-f]{64}$", var.binary_sha256))
    error_message = "binary_sha256 must be 64 lower-case hex digits, or empty."
  }
}

variable "global_member" {
  description = "Whether the region's first metastore host also runs a member of the federation's global configuration store (role global; member name <region>-meta-1). Three regions with one each make a global store that survives the loss of a region."
  type        = bool
  default     = false
}

variable "global_store" {
  description = "The federation's global configuration store (passed to region-config): client endpoints, and for the global members the initial cluster and token. Empty endpoints: a region alone."
  type = object({
    endpoints       = list(string)
    initial_cluster = optional(string, "")
    cluster_token   = optional(string, "isobar-global")
  })
  default = { endpoints = [] }
}

variable "peer_gateways" {
  description = "The other regions' NATS gateway URLs (\"nats://host:7222\"), by region name (passed to region-config)."
  type        = map(string)
  default     = {}
}

variable "client_cidrs" {
  description = "Where Pulsar clients and admin tools connect from: ports 6650 and 8080 of the brokers (the load balancer keeps the client's address)."
  type        = list(string)
  default     = []
}

variable "peer_cidrs" {
  description = "The other regions' CIDRs: the NATS gateway (7222) and the global store's client and peer ports (2479, 2480) accept them."
  type        = list(string)
  default     = []
}

variable "ssh_cidrs" {
  description = "Where SSH (22) is allowed from; empty allows none."
  type        = list(string)
  default     = []
}

variable "lb_internal" {
  description = "Whether the network load balancer is internal (reachable inside the VPC and networks routed to it) rather than internet-facing."
  type        = bool
  default     = true
}

variable "compress_user_data" {
  description = "Pass the cloud-config to EC2 gzip-compressed (user_data_base64): needed when it exceeds EC2's 16 KiB limit. Off, user_data is the readable document."
  type        = bool
  default     = false
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}
