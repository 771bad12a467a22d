# A namespace replicated across three regions, with a partitioned topic
# and a subscription. Start a federation of those regions with
#
#   go run ./cmd/isobar dev --regions us-east,eu-west,ap-south
#
# (admin REST on 127.0.0.1:8080, :8180 and :8280), then `tofu apply`.
# Messages produced in any region reach the other two.

terraform {
  required_providers {
    isobar = {
      source = "isobar-mq/isobar"
    }
  }
}

variable "web_service_url" {
  description = "The regions' admin REST URLs; the first that answers is used."
  type        = list(string)
  default     = ["http://127.0.0.1:8080", "http://127.0.0.1:8180", "http://127.0.0.1:8280"]
}

variable "regions" {
  description = "The regions (clusters) to replicate to."
  type        = list(string)
  default     = ["us-east", "eu-west", "ap-south"]
}

provider "isobar" {
  web_service_url = var.web_service_url
}

resource "isobar_tenant" "shop" {
  name             = "shop"
  allowed_clusters = var.regions
}

resource "isobar_namespace" "orders" {
  tenant               = isobar_tenant.shop.name
  name                 = "orders"
  replication_clusters = var.regions
  # Active-active: every region takes writes. Uncomment to make one region
  # the primary (the others then send clients there):
  # primary_region = "us-east"
  # Replication is asynchronous. Uncomment to acknowledge a publish only
  # once another region holds it too (no acknowledged message is lost when
  # a region fails):
  # sync_replication = { regions = 1 }

  retention = {
    time_in_minutes = 1440
    size_in_mb      = 1024
  }
  deduplication = true
}

resource "isobar_topic" "orders" {
  tenant     = isobar_namespace.orders.tenant
  namespace  = isobar_namespace.orders.name
  name       = "orders"
  partitions = 4
}

resource "isobar_subscription" "fulfilment" {
  topic            = isobar_topic.orders.id
  name             = "fulfilment"
  initial_position = "earliest"
}

output "topic" {
  value = isobar_topic.orders.id
}
