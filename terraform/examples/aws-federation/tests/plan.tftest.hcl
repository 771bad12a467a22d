# Plans the whole federation with the three AWS providers mocked (nothing
# is created, no credentials are needed) and the real isobar provider,
# which plans new clusters, tenants and namespaces without reaching a
# server (adopt_clusters is off: importing would read the records).

mock_provider "aws" {
  alias = "us_east_1"
  mock_resource "aws_lb" {
    defaults = {
      arn      = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/isobar-us-east-1/0123456789abcdef"
      dns_name = "isobar-us-east-1.elb.us-east-1.amazonaws.com"
    }
  }
  mock_resource "aws_lb_target_group" {
    defaults = {
      arn = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/isobar-us-east-1/0123456789abcdef"
    }
  }
}

mock_provider "aws" {
  alias = "eu_west_1"
  mock_resource "aws_lb" {
    defaults = {
      arn      = "arn:aws:elasticloadbalancing:eu-west-1:123456789012:loadbalancer/net/isobar-eu-west-1/0123456789abcdef"
      dns_name = "isobar-eu-west-1.elb.eu-west-1.amazonaws.com"
    }
  }
  mock_resource "aws_lb_target_group" {
    defaults = {
      arn = "arn:aws:elasticloadbalancing:eu-west-1:123456789012:targetgroup/isobar-eu-west-1/0123456789abcdef"
    }
  }
}

mock_provider "aws" {
  alias = "ap_south_1"
  mock_resource "aws_lb" {
    defaults = {
      arn      = "arn:aws:elasticloadbalancing:ap-south-1:123456789012:loadbalancer/net/isobar-ap-south-1/0123456789abcdef"
      dns_name = "isobar-ap-south-1.elb.ap-south-1.amazonaws.com"
    }
  }
  mock_resource "aws_lb_target_group" {
    defaults = {
      arn = "arn:aws:elasticloadbalancing:ap-south-1:123456789012:targetgroup/isobar-ap-south-1/0123456789abcdef"
    }
  }
}

variables {
  networks = {
    "us-east-1" = {
      vpc_id   = "vpc-use1"
      vpc_cidr = "10.10.0.0/16"
      subnets = [
        { id = "subnet-use1a", cidr = "10.10.0.0/24", az = "us-east-1a" },
        { id = "subnet-use1b", cidr = "10.10.1.0/24", az = "us-east-1b" },
        { id = "subnet-use1c", cidr = "10.10.2.0/24", az = "us-east-1c" },
      ]
    }
    "eu-west-1" = {
      vpc_id   = "vpc-euw1"
      vpc_cidr = "10.20.0.0/16"
      subnets = [
        { id = "subnet-euw1a", cidr = "10.20.0.0/24", az = "eu-west-1a" },
        { id = "subnet-euw1b", cidr = "10.20.1.0/24", az = "eu-west-1b" },
        { id = "subnet-euw1c", cidr = "10.20.2.0/24", az = "eu-west-1c" },
      ]
    }
    "ap-south-1" = {
      vpc_id   = "vpc-aps1"
      vpc_cidr = "10.30.0.0/16"
      subnets = [
        { id = "subnet-aps1a", cidr = "10.30.0.0/24", az = "ap-south-1a" },
        { id = "subnet-aps1b", cidr = "10.30.1.0/24", az = "ap-south-1b" },
        { id = "subnet-aps1c", cidr = "10.30.2.0/24", az = "ap-south-1c" },
      ]
    }
  }
  ami_ids = {
    "us-east-1"  = "ami-00000000000000001"
    "eu-west-1"  = "ami-00000000000000002"
    "ap-south-1" = "ami-00000000000000003"
  }
  binary_url     = "https://downloads.example.com/isobar-linux-amd64"
  client_cidrs   = ["192.0.2.0/24"]
  admin_urls     = ["http://127.0.0.1:1"]
  adopt_clusters = false
}

run "plan" {
  command = plan

  assert {
    condition = output.global_store.initial_cluster == join(",", [
      "ap-south-1-meta-1=http://10.30.0.68:2480",
      "eu-west-1-meta-1=http://10.20.0.68:2480",
      "us-east-1-meta-1=http://10.10.0.68:2480",
    ])
    error_message = "one global store member per region, on its first metastore host"
  }
  assert {
    condition     = toset(output.global_store.endpoints) == toset(["http://10.10.0.68:2479", "http://10.20.0.68:2479", "http://10.30.0.68:2479"])
    error_message = "the global store's client endpoints are the three members"
  }
  assert {
    condition     = output.nats_gateways == { "us-east-1" = "nats://10.10.0.74:7222", "eu-west-1" = "nats://10.20.0.74:7222", "ap-south-1" = "nats://10.30.0.74:7222" }
    error_message = "each region's NATS gateway at its first NATS host"
  }
  assert {
    condition     = length(module.us_east_1.instance_ids) == 11 && length(module.eu_west_1.instance_ids) == 11 && length(module.ap_south_1.instance_ids) == 11
    error_message = "11 hosts per region"
  }
  assert {
    condition     = toset(keys(isobar_cluster.region)) == toset(["us-east-1", "eu-west-1", "ap-south-1"])
    error_message = "a cluster per region"
  }
  assert {
    condition     = isobar_namespace.replicated.replication_clusters == toset(["us-east-1", "eu-west-1", "ap-south-1"]) && isobar_tenant.geo.allowed_clusters == toset(["us-east-1", "eu-west-1", "ap-south-1"])
    error_message = "the namespace replicates to every region"
  }
  assert {
    condition = (isobar_cluster.region["eu-west-1"].broker_service_url == "pulsar://isobar-eu-west-1.elb.eu-west-1.amazonaws.com:6650" &&
      isobar_cluster.region["eu-west-1"].service_url == "http://isobar-eu-west-1.elb.eu-west-1.amazonaws.com:8080" &&
    isobar_cluster.region["eu-west-1"].nats_url == "nats://10.20.0.74:4222")
    error_message = "a region's cluster record names its load balancer and its NATS server"
  }
}

# The first step of README.md: only the regions, with the clusters'
# import on. Nothing of the isobar provider's is planned, so nothing
# reaches for a server (which would fail: nothing listens there).
run "first_step_targets_the_regions" {
  command = plan
  plan_options {
    target = [module.us_east_1, module.eu_west_1, module.ap_south_1]
  }
  variables {
    adopt_clusters      = true
    admin_retry_timeout = "1s"
  }
  assert {
    condition     = length(module.eu_west_1.instance_ids) == 11
    error_message = "the regions are planned"
  }
}

run "missing_region" {
  command = plan
  variables {
    networks = {
      "us-east-1" = { vpc_id = "vpc-use1", vpc_cidr = "10.10.0.0/16", subnets = [{ id = "subnet-use1a", cidr = "10.10.0.0/24" }] }
    }
  }
  expect_failures = [var.networks]
}
