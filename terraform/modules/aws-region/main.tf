# An Isobar region on EC2: the hosts of every role, their security group,
# and a network load balancer over the brokers. Each host's configuration
# and cloud-config come from ../region-config.
#
# Addresses are fixed before anything exists: each host's private address
# is computed with cidrhost() from its subnet's CIDR (see address_block),
# so the configs that name every other host can be rendered at plan time
# and passed to the instances as user_data, and other regions can name
# this one's global store members and NATS gateway without waiting for it.

locals {
  name = "isobar-${var.region}"

  # The slots of each role in a subnet's address block.
  slots = {
    metastore  = { first = 4, size = 6 }
    nats       = { first = 10, size = 4 }
    replicator = { first = 14, size = 4 }
    broker     = { first = 18, size = 14 }
    bookie     = { first = 32, size = 31 }
  }
  short = {
    metastore  = "meta"
    bookie     = "bookie"
    broker     = "broker"
    nats       = "nats"
    replicator = "repl"
  }

  blocks = [for s in var.subnets : cidrsubnet(s.cidr, 26 - tonumber(split("/", s.cidr)[1]), var.address_block)]

  # Host i of a role is in subnet i mod n, at the role's slot i div n of
  # that subnet's block.
  instances = merge([for role, slot in local.slots : {
    for i in range(var.counts[role]) : "${local.short[role]}-${i + 1}" => {
      role      = role
      subnet    = i % length(var.subnets)
      subnet_id = var.subnets[i % length(var.subnets)].id
      rack      = coalesce(var.subnets[i % length(var.subnets)].az, var.subnets[i % length(var.subnets)].id)
      address   = cidrhost(local.blocks[i % length(var.subnets)], slot.first + floor(i / length(var.subnets)))
      type      = var.instance_types[role]
    }
  }]...)

  journal_dir = "${var.data_dir}/journal"
  ledger_dir  = "${var.data_dir}/ledgers"

  hosts = {
    for name, h in local.instances : name => merge(
      {
        address = h.address
        roles   = h.role == "metastore" && var.global_member && name == "meta-1" ? ["metastore", "global"] : [h.role]
      },
      h.role == "bookie" ? { rack = h.rack, journal_dir = local.journal_dir, ledger_dir = local.ledger_dir } : {},
    )
  }

  disks = {
    for name, h in local.instances : name => {
      (local.journal_dir) = var.bookie_volumes.journal.os_device
      (local.ledger_dir)  = var.bookie_volumes.ledger.os_device
    } if h.role == "bookie"
  }

  brokers = [for name, h in local.instances : name if h.role == "broker"]

  # What other regions need, computed from the address plan alone (not
  # from region-config's outputs) so that regions can pass them to each
  # other without a dependency cycle through their global_store inputs.
  global_hosts     = [for name, h in local.hosts : name if contains(h.roles, "global")]
  global_endpoints = [for name in local.global_hosts : "http://${local.instances[name].address}:2479"]
  global_peers     = { for name in local.global_hosts : "${var.region}-${name}" => "http://${local.instances[name].address}:2480" }
  nats_gateway_url = "nats://${local.instances["nats-1"].address}:7222"

  tags = merge(var.tags, { "isobar:region" = var.region })
}

module "config" {
  source = "../region-config"

  region        = var.region
  hosts         = local.hosts
  global_store  = var.global_store
  peer_gateways = var.peer_gateways
  ledger        = var.ledger
  paths         = { data_dir = var.data_dir }
  binary_url    = var.binary_url
  binary_sha256 = var.binary_sha256
  disks         = local.disks
  # service_url and web_service_url are left empty: the hosts name every
  # broker rather than the load balancer, so that the instances' user_data
  # does not depend on it (and replicators inside the region reach the
  # brokers directly).
}

# The hosts' address block, reserved so that AWS assigns none of its
# addresses to anything else (the load balancer's nodes take addresses
# from the same subnets).
resource "aws_ec2_subnet_cidr_reservation" "hosts" {
  count            = var.reserve_address_block ? length(var.subnets) : 0
  subnet_id        = var.subnets[count.index].id
  cidr_block       = local.blocks[count.index]
  reservation_type = "explicit"
  description      = "${local.name}: fixed addresses of the Isobar hosts"
}

resource "aws_instance" "host" {
  for_each = local.instances

  ami                    = var.ami_id
  instance_type          = each.value.type
  subnet_id              = each.value.subnet_id
  private_ip             = each.value.address
  vpc_security_group_ids = [aws_security_group.hosts.id]
  key_name               = var.key_name
  iam_instance_profile   = var.iam_instance_profile

  user_data        = var.compress_user_data ? null : module.config.hosts[each.key].cloud_init
  user_data_base64 = var.compress_user_data ? base64gzip(module.config.hosts[each.key].cloud_init) : null

  metadata_options {
    http_tokens   = "required"
    http_endpoint = "enabled"
  }

  root_block_device {
    volume_size = var.root_volume.size
    volume_type = var.root_volume.type
    encrypted   = true
  }

  dynamic "ebs_block_device" {
    for_each = each.value.role == "bookie" ? [var.bookie_volumes.journal, var.bookie_volumes.ledger] : []
    content {
      device_name           = ebs_block_device.value.device_name
      volume_size           = ebs_block_device.value.size
      volume_type           = ebs_block_device.value.type
      iops                  = ebs_block_device.value.iops
      throughput            = ebs_block_device.value.throughput
      encrypted             = var.bookie_volumes.encrypted
      delete_on_termination = var.bookie_volumes.delete_on_termination
    }
  }

  # isobar:config is the rendered cloud-config's hash: a change to it
  # shows in the plan as a change of this tag (see lifecycle).
  tags = merge(local.tags, {
    Name            = "${local.name}-${each.key}"
    "isobar:role"   = each.value.role
    "isobar:config" = substr(sha256(module.config.hosts[each.key].cloud_init), 0, 16)
  })
  volume_tags = merge(local.tags, { Name = "${local.name}-${each.key}" })

  lifecycle {
    # cloud-init applies user data at the first boot only, and an update
    # of user_data would stop and start every changed host at once: a new
    # configuration or image reaches a host when it is replaced, one at a
    # time (README.md).
    ignore_changes = [ami, user_data, user_data_base64]

    precondition {
      condition     = var.compress_user_data || length(module.config.hosts[each.key].cloud_init) <= 16384
      error_message = "the host's cloud-config exceeds EC2's 16 KiB user data limit: set compress_user_data = true."
    }
  }

  depends_on = [aws_ec2_subnet_cidr_reservation.hosts]
}

resource "aws_security_group" "hosts" {
  name_prefix = "${local.name}-"
  description = "Isobar region ${var.region}: its hosts"
  vpc_id      = var.vpc_id
  tags        = merge(local.tags, { Name = "${local.name}-hosts" })

  lifecycle {
    create_before_destroy = true
  }
}

locals {
  # Every Isobar port, from inside the region: etcd client, peer and health
  # (2379-2381), the global store's (2479-2481), the bookie (3181) and its
  # health port (8000), the broker (6650, 8080), NATS client (4222), routes
  # (6222), gateway (7222) and monitoring (8222), the replicator's health
  # port (8090).
  intra_ports = {
    etcd       = [2379, 2381]
    global     = [2479, 2481]
    bookie     = [3181, 3181]
    bookie-web = [8000, 8000]
    pulsar     = [6650, 6650]
    http       = [8080, 8080]
    nats       = [4222, 4222]
    nats-route = [6222, 6222]
    nats-gw    = [7222, 7222]
    nats-web   = [8222, 8222]
    replicator = [8090, 8090]
  }
  client_ports = { pulsar = 6650, http = 8080 }
  peer_ports   = { nats-gw = [7222, 7222], global = [2479, 2480] }

  ingress = merge(
    { for k, p in local.intra_ports : "vpc-${k}" => { cidr = var.vpc_cidr, from = p[0], to = p[1], description = "Isobar ${k} from the region's VPC" } },
    merge([for c in var.client_cidrs : {
      for k, p in local.client_ports : "client-${k}-${c}" => { cidr = c, from = p, to = p, description = "Isobar ${k} from clients" }
    }]...),
    merge([for c in var.peer_cidrs : {
      for k, p in local.peer_ports : "peer-${k}-${c}" => { cidr = c, from = p[0], to = p[1], description = "Isobar ${k} from a peer region" }
    }]...),
    { for c in var.ssh_cidrs : "ssh-${c}" => { cidr = c, from = 22, to = 22, description = "SSH" } },
  )
}

resource "aws_vpc_security_group_ingress_rule" "hosts" {
  for_each = local.ingress

  security_group_id = aws_security_group.hosts.id
  cidr_ipv4         = each.value.cidr
  from_port         = each.value.from
  to_port           = each.value.to
  ip_protocol       = "tcp"
  description       = each.value.description
  tags              = local.tags
}

resource "aws_vpc_security_group_egress_rule" "hosts" {
  security_group_id = aws_security_group.hosts.id
  cidr_ipv4         = "0.0.0.0/0"
  ip_protocol       = "-1"
  description       = "Everything out (the binary's download, peer regions)"
  tags              = local.tags
}

# The brokers behind a network load balancer: Pulsar on 6650, the admin
# REST API and lookups on 8080. Both target groups check a broker's
# /readyz on 8080, which fails from the first moment of a drain.
resource "aws_lb" "brokers" {
  name                             = replace(substr(local.name, 0, 32), "/-+$/", "")
  load_balancer_type               = "network"
  internal                         = var.lb_internal
  subnets                          = [for s in var.subnets : s.id]
  enable_cross_zone_load_balancing = true
  tags                             = local.tags
}

resource "aws_lb_target_group" "brokers" {
  for_each = local.client_ports

  name                 = "${replace(substr(local.name, 0, 25), "/-+$/", "")}-${each.value}"
  port                 = each.value
  protocol             = "TCP"
  target_type          = "instance"
  vpc_id               = var.vpc_id
  deregistration_delay = 30

  health_check {
    protocol            = "HTTP"
    port                = "8080"
    path                = "/readyz"
    matcher             = "200"
    interval            = 10
    healthy_threshold   = 2
    unhealthy_threshold = 2
  }

  tags = local.tags
}

resource "aws_lb_listener" "brokers" {
  for_each = local.client_ports

  load_balancer_arn = aws_lb.brokers.arn
  port              = each.value
  protocol          = "TCP"

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.brokers[each.key].arn
  }

  tags = local.tags
}

resource "aws_lb_target_group_attachment" "brokers" {
  for_each = { for p in setproduct(keys(local.client_ports), local.brokers) : "${p[0]}/${p[1]}" => { port = p[0], host = p[1] } }

  target_group_arn = aws_lb_target_group.brokers[each.value.port].arn
  target_id        = aws_instance.host[each.value.host].id
  port             = local.client_ports[each.value.port]
}
