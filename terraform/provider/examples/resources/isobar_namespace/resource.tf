# Replicated to three regions, active-standby with us-east as the primary:
# changing primary_region fails over. A publish is acknowledged once one
# other region holds it too (after 30 s without, from us-east alone).
resource "isobar_namespace" "payments" {
  tenant               = isobar_tenant.acme.name
  name                 = "payments"
  replication_clusters = ["us-east", "eu-west", "ap-south"]
  primary_region       = "us-east"
  sync_replication = {
    regions                = 1
    fallback_after_seconds = 30
  }

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
