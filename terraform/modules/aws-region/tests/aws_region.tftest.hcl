# Plans the module against a mocked AWS provider: nothing is created and
# no credentials are needed. OpenTofu makes up the mocked resources'
# computed values at plan time; the ARNs are given, since the provider
# checks the ARNs passed to other resources.

mock_provider "aws" {
  mock_resource "aws_lb" {
    defaults = {
      arn      = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/isobar-us-east-1/0123456789abcdef"
      dns_name = "isobar-us-east-1-0123456789abcdef.elb.us-east-1.amazonaws.com"
    }
  }
  mock_resource "aws_lb_target_group" {
    defaults = {
      arn = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/isobar-us-east-1/0123456789abcdef"
    }
  }
}

variables {
  region   = "us-east-1"
  vpc_id   = "vpc-0123456789abcdef0"
  vpc_cidr = "10.10.0.0/16"
  subnets = [
    { id = "subnet-a", cidr = "10.10.0.0/24", az = "us-east-1a" },
    { id = "subnet-b", cidr = "10.10.1.0/24", az = "us-east-1b" },
    { id = "subnet-c", cidr = "10.10.2.0/24", az = "us-east-1c" },
  ]
  ami_id       = "ami-0123456789abcdef0"
  binary_url   = "https://downloads.example.com/isobar-linux-amd64"
  client_cidrs = ["192.0.2.0/24"]
  peer_cidrs   = ["10.20.0.0/16", "10.30.0.0/16"]
}

run "defaults" {
  command = plan

  assert {
    condition     = length([for k, i in aws_instance.host : k if i.tags["isobar:role"] == "metastore"]) == 3
    error_message = "3 metastore hosts expected"
  }
  assert {
    condition     = length([for k, i in aws_instance.host : k if i.tags["isobar:role"] == "bookie"]) == 3
    error_message = "3 bookies expected"
  }
  assert {
    condition     = length([for k, i in aws_instance.host : k if i.tags["isobar:role"] == "broker"]) == 2
    error_message = "2 brokers expected"
  }
  assert {
    condition     = length([for k, i in aws_instance.host : k if i.tags["isobar:role"] == "nats"]) == 1 && length([for k, i in aws_instance.host : k if i.tags["isobar:role"] == "replicator"]) == 2
    error_message = "1 NATS server and 2 replicators expected"
  }
  assert {
    condition     = length(aws_instance.host) == 11
    error_message = "11 instances expected"
  }

  # Every bookie has its journal and its ledgers on two EBS volumes; no
  # other host has any.
  assert {
    condition = alltrue([for k, i in aws_instance.host :
      length(toset([for d in i.ebs_block_device : d.device_name])) == (i.tags["isobar:role"] == "bookie" ? 2 : 0)
    ])
    error_message = "each bookie needs exactly two EBS volumes, the other hosts none"
  }
  assert {
    condition     = toset([for d in aws_instance.host["bookie-2"].ebs_block_device : d.device_name]) == toset(["/dev/sdf", "/dev/sdg"])
    error_message = "the bookie's volumes are /dev/sdf and /dev/sdg"
  }

  # Fixed addresses: block 1 (.64/26) of each subnet, round robin.
  assert {
    condition = (aws_instance.host["meta-1"].private_ip == "10.10.0.68" &&
      aws_instance.host["meta-2"].private_ip == "10.10.1.68" &&
      aws_instance.host["meta-3"].private_ip == "10.10.2.68" &&
      aws_instance.host["bookie-1"].private_ip == "10.10.0.96" &&
      aws_instance.host["broker-2"].private_ip == "10.10.1.82" &&
    aws_instance.host["broker-2"].subnet_id == "subnet-b")
    error_message = "unexpected private addresses"
  }
  assert {
    condition     = length(distinct([for i in aws_instance.host : i.private_ip])) == length(aws_instance.host)
    error_message = "private addresses must be unique"
  }
  assert {
    condition     = length(aws_ec2_subnet_cidr_reservation.hosts) == 3 && aws_ec2_subnet_cidr_reservation.hosts[1].cidr_block == "10.10.1.64/26" && aws_ec2_subnet_cidr_reservation.hosts[1].reservation_type == "explicit"
    error_message = "each subnet's address block is reserved"
  }

  # The NLB listens on 6650 and 8080 and checks /readyz on 8080.
  assert {
    condition     = aws_lb.brokers.load_balancer_type == "network" && aws_lb.brokers.internal
    error_message = "an internal network load balancer expected"
  }
  assert {
    condition     = toset([for l in aws_lb_listener.brokers : l.port]) == toset([6650, 8080]) && alltrue([for l in aws_lb_listener.brokers : l.protocol == "TCP"])
    error_message = "the load balancer listens on TCP 6650 and 8080"
  }
  assert {
    condition = alltrue([for tg in aws_lb_target_group.brokers :
      tg.health_check[0].protocol == "HTTP" && tg.health_check[0].path == "/readyz" && tg.health_check[0].port == "8080"
    ]) && toset([for tg in aws_lb_target_group.brokers : tg.port]) == toset([6650, 8080])
    error_message = "target groups on 6650 and 8080 checking HTTP /readyz on 8080"
  }
  assert {
    condition     = length(aws_lb_target_group_attachment.brokers) == 4 && aws_lb_target_group_attachment.brokers["pulsar/broker-1"].port == 6650
    error_message = "each broker is in both target groups"
  }

  # Security group rules.
  assert {
    condition = alltrue([for p in [2379, 2380, 2381, 2479, 2480, 3181, 8000, 6650, 8080, 4222, 6222, 7222, 8222, 8090] :
      anytrue([for r in aws_vpc_security_group_ingress_rule.hosts : r.cidr_ipv4 == "10.10.0.0/16" && r.from_port <= p && p <= r.to_port])
    ])
    error_message = "every Isobar port is open to the region's VPC"
  }
  assert {
    condition = (aws_vpc_security_group_ingress_rule.hosts["client-pulsar-192.0.2.0/24"].from_port == 6650 &&
    aws_vpc_security_group_ingress_rule.hosts["client-http-192.0.2.0/24"].to_port == 8080)
    error_message = "clients reach 6650 and 8080"
  }
  assert {
    condition     = toset([for r in aws_vpc_security_group_ingress_rule.hosts : "${r.from_port}-${r.to_port}" if r.cidr_ipv4 == "192.0.2.0/24"]) == toset(["6650-6650", "8080-8080"])
    error_message = "clients reach only 6650 and 8080"
  }
  assert {
    condition = alltrue([for c in ["10.20.0.0/16", "10.30.0.0/16"] :
      toset([for r in aws_vpc_security_group_ingress_rule.hosts : "${r.from_port}-${r.to_port}" if r.cidr_ipv4 == c]) == toset(["7222-7222", "2479-2480"])
    ])
    error_message = "peer regions reach the NATS gateway and the global store, nothing else"
  }
  assert {
    condition     = length([for r in aws_vpc_security_group_ingress_rule.hosts : r if r.from_port == 22]) == 0
    error_message = "no SSH without ssh_cidrs"
  }

  # user_data is the host's rendered cloud-config: the bookie's volumes
  # mounted at its journal and ledger directories.
  assert {
    condition = (startswith(aws_instance.host["bookie-1"].user_data, "#cloud-config") &&
      strcontains(aws_instance.host["bookie-1"].user_data, "/var/lib/isobar/journal") &&
      strcontains(aws_instance.host["bookie-1"].user_data, "/var/lib/isobar/ledgers") &&
      strcontains(aws_instance.host["bookie-1"].user_data, "/dev/sdf") &&
    strcontains(aws_instance.host["bookie-1"].user_data, "/dev/sdg"))
    error_message = "the bookie's user_data mounts its journal and ledger volumes"
  }
  assert {
    condition     = !strcontains(aws_instance.host["broker-1"].user_data, "/dev/sdf") && strcontains(aws_instance.host["broker-1"].user_data, var.binary_url)
    error_message = "a broker's user_data installs the binary and mounts no bookie volume"
  }
  assert {
    condition     = aws_instance.host["bookie-1"].tags["isobar:config"] == substr(sha256(aws_instance.host["bookie-1"].user_data), 0, 16)
    error_message = "the isobar:config tag is the cloud-config's hash"
  }
  assert {
    condition     = aws_instance.host["broker-1"].metadata_options[0].http_tokens == "required"
    error_message = "IMDSv2 required"
  }

  assert {
    condition     = output.global_endpoints == [] && output.global_peers == {} && output.nats_gateway_url == "nats://10.10.0.74:7222"
    error_message = "no global member by default; the NATS gateway at nats-1's address"
  }
  assert {
    condition     = output.broker_web_urls == ["http://10.10.0.82:8080", "http://10.10.1.82:8080"]
    error_message = "the brokers' admin URLs by address"
  }
  assert {
    condition     = output.service_url == "pulsar://isobar-us-east-1-0123456789abcdef.elb.us-east-1.amazonaws.com:6650" && output.web_service_url == "http://isobar-us-east-1-0123456789abcdef.elb.us-east-1.amazonaws.com:8080"
    error_message = "the service URLs are the load balancer's"
  }
}

run "global_member_and_counts" {
  command = plan

  variables {
    global_member = true
    global_store = {
      endpoints       = ["http://10.10.0.68:2479", "http://10.20.0.68:2479", "http://10.30.0.68:2479"]
      initial_cluster = "us-east-1-meta-1=http://10.10.0.68:2480,eu-west-1-meta-1=http://10.20.0.68:2480,ap-south-1-meta-1=http://10.30.0.68:2480"
    }
    peer_gateways = { "eu-west-1" = "nats://10.20.0.74:7222", "ap-south-1" = "nats://10.30.0.74:7222" }
    counts        = { metastore = 5, bookie = 4, broker = 3 }
    ssh_cidrs     = ["198.51.100.7/32"]
    lb_internal   = false
  }

  assert {
    condition     = output.global_peers == { "us-east-1-meta-1" = "http://10.10.0.68:2480" } && output.global_endpoints == ["http://10.10.0.68:2479"]
    error_message = "meta-1 is the region's global member"
  }
  assert {
    condition     = length(aws_instance.host) == 15 && length([for i in aws_instance.host : i if i.tags["isobar:role"] == "bookie" && length(toset([for d in i.ebs_block_device : d.device_name])) == 2]) == 4
    error_message = "5 + 4 + 3 + 1 + 2 hosts, 4 bookies with two volumes each"
  }
  assert {
    condition     = aws_instance.host["meta-4"].private_ip == "10.10.0.69" && aws_instance.host["bookie-4"].private_ip == "10.10.0.97"
    error_message = "the fourth host of a role takes the next slot of the first subnet"
  }
  assert {
    condition     = aws_vpc_security_group_ingress_rule.hosts["ssh-198.51.100.7/32"].from_port == 22 && !aws_lb.brokers.internal
    error_message = "SSH from ssh_cidrs; an internet-facing load balancer"
  }
}

run "compressed_user_data" {
  command = plan

  variables {
    compress_user_data = true
  }

  assert {
    condition     = startswith(aws_instance.host["bookie-1"].user_data_base64, "H4sI")
    error_message = "gzip-compressed user data in user_data_base64"
  }
}

run "too_few_bookies" {
  command = plan
  variables {
    counts = { bookie = 2 }
    ledger = { ensemble_size = 3, write_quorum = 2, ack_quorum = 2 }
  }
  expect_failures = [var.ledger]
}

run "invalid_region" {
  command = plan
  variables {
    region = "US_East"
  }
  expect_failures = [var.region]
}

run "even_metastore" {
  command = plan
  variables {
    counts = { metastore = 4 }
  }
  expect_failures = [var.counts]
}

run "small_subnet" {
  command = plan
  variables {
    subnets = [{ id = "subnet-a", cidr = "10.10.0.0/27" }]
  }
  expect_failures = [var.subnets]
}

run "same_device_twice" {
  command = plan
  variables {
    bookie_volumes = { ledger = { device_name = "/dev/sdf", os_device = "/dev/sdf" } }
  }
  expect_failures = [var.bookie_volumes]
}
