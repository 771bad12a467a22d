# Replicated to three regions, active-standby with us-east as the primary:
# changing primary_region fails over.
resource "isobar_namespace" "payments" {
  tenant               = isobar_tenant.acme.name
  name                 = "payments"
  replication_clusters = ["us-east", "eu-west", "ap-south"]
  primary_region       = "us-east"

  retention = {
    time_in_minutes = 10080 # a week
    size_in_mb      = 10240
  }
  message_ttl_seconds = 86400
  backlog_quota = {
    destination_storage = {
      limit_size = 10737418240
      policy     = "producer_request_hold"
    }
  }
  deduplication = true
  auto_topic_creation = {
    allow      = true
    type       = "partitioned"
    partitions = 4
  }
}
