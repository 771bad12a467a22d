# An Isobar federation of three AWS regions: each region's hosts from
# ../../modules/aws-region, a global configuration store with one member
# per region (on each region's first metastore host), the regions' NATS
# servers joined by gateways, then the federation's clusters, a tenant and
# a namespace replicated everywhere, through the isobar provider.
# README.md says how to apply it (in two steps).

provider "aws" {
  alias  = "us_east_1"
  region = "us-east-1"
}

provider "aws" {
  alias  = "eu_west_1"
  region = "eu-west-1"
}

provider "aws" {
  alias  = "ap_south_1"
  region = "ap-south-1"
}

locals {
  regions = ["us-east-1", "eu-west-1", "ap-south-1"]

  # The global store's members and the NATS gateways come from each
  # region's address plan (outputs that depend only on the module's
  # network inputs, never on its global_store or peer_gateways inputs), so
  # every region can be given the others' without a dependency cycle.
  global_peers = merge(
    module.us_east_1.global_peers,
    module.eu_west_1.global_peers,
    module.ap_south_1.global_peers,
  )
  global_store = {
    endpoints       = concat(module.us_east_1.global_endpoints, module.eu_west_1.global_endpoints, module.ap_south_1.global_endpoints)
    initial_cluster = join(",", [for name, url in local.global_peers : "${name}=${url}"])
    cluster_token   = "isobar-aws-federation"
  }
  gateways = {
    "us-east-1"  = module.us_east_1.nats_gateway_url
    "eu-west-1"  = module.eu_west_1.nats_gateway_url
    "ap-south-1" = module.ap_south_1.nats_gateway_url
  }
  vpc_cidrs = { for r, n in var.networks : r => n.vpc_cidr }
}

module "us_east_1" {
  source    = "../../modules/aws-region"
  providers = { aws = aws.us_east_1 }

  region        = "us-east-1"
  vpc_id        = var.networks["us-east-1"].vpc_id
  vpc_cidr      = var.networks["us-east-1"].vpc_cidr
  subnets       = var.networks["us-east-1"].subnets
  ami_id        = var.ami_ids["us-east-1"]
  key_name      = var.key_name
  binary_url    = var.binary_url
  binary_sha256 = var.binary_sha256
  global_member = true
  global_store  = local.global_store
  peer_gateways = { for r, url in local.gateways : r => url if r != "us-east-1" }
  client_cidrs  = var.client_cidrs
  peer_cidrs    = [for r, c in local.vpc_cidrs : c if r != "us-east-1"]
  tags          = var.tags
}

module "eu_west_1" {
  source    = "../../modules/aws-region"
  providers = { aws = aws.eu_west_1 }

  region        = "eu-west-1"
  vpc_id        = var.networks["eu-west-1"].vpc_id
  vpc_cidr      = var.networks["eu-west-1"].vpc_cidr
  subnets       = var.networks["eu-west-1"].subnets
  ami_id        = var.ami_ids["eu-west-1"]
  key_name      = var.key_name
  binary_url    = var.binary_url
  binary_sha256 = var.binary_sha256
  global_member = true
  global_store  = local.global_store
  peer_gateways = { for r, url in local.gateways : r => url if r != "eu-west-1" }
  client_cidrs  = var.client_cidrs
  peer_cidrs    = [for r, c in local.vpc_cidrs : c if r != "eu-west-1"]
  tags          = var.tags
}

module "ap_south_1" {
  source    = "../../modules/aws-region"
  providers = { aws = aws.ap_south_1 }

  region        = "ap-south-1"
  vpc_id        = var.networks["ap-south-1"].vpc_id
  vpc_cidr      = var.networks["ap-south-1"].vpc_cidr
  subnets       = var.networks["ap-south-1"].subnets
  ami_id        = var.ami_ids["ap-south-1"]
  key_name      = var.key_name
  binary_url    = var.binary_url
  binary_sha256 = var.binary_sha256
  global_member = true
  global_store  = local.global_store
  peer_gateways = { for r, url in local.gateways : r => url if r != "ap-south-1" }
  client_cidrs  = var.client_cidrs
  peer_cidrs    = [for r, c in local.vpc_cidrs : c if r != "ap-south-1"]
  tags          = var.tags
}

locals {
  clusters = {
    "us-east-1"  = module.us_east_1
    "eu-west-1"  = module.eu_west_1
    "ap-south-1" = module.ap_south_1
  }
}

# The isobar provider talks to the regions' admin REST API, any region's:
# the load balancers' names are known once the first apply has made them.
# admin_retry_timeout lets it wait for brokers that are still starting.
provider "isobar" {
  web_service_url = length(var.admin_urls) > 0 ? var.admin_urls : [for r in local.regions : local.clusters[r].web_service_url]
  retry_timeout   = var.admin_retry_timeout
}

# Every region's cluster record, with the load balancer's URLs and the
# region's NATS servers. Each region's first broker writes its record when
# it starts (with its own URLs), so the records are imported, then updated.
import {
  for_each = var.adopt_clusters ? toset(local.regions) : toset([])
  to       = isobar_cluster.region[each.key]
  id       = each.key
}

resource "isobar_cluster" "region" {
  for_each = local.clusters

  name               = each.key
  service_url        = each.value.web_service_url
  broker_service_url = each.value.service_url
  nats_url           = each.value.nats_url
}

resource "isobar_tenant" "geo" {
  name             = "geo"
  allowed_clusters = [for c in isobar_cluster.region : c.name]
}

# Active-active: every region takes writes, and every message reaches the
# other two regions.
resource "isobar_namespace" "replicated" {
  tenant               = isobar_tenant.geo.name
  name                 = "replicated"
  replication_clusters = [for c in isobar_cluster.region : c.name]

  retention = {
    time_in_minutes = 1440
    size_in_mb      = 1024
  }
  deduplication = true
}
