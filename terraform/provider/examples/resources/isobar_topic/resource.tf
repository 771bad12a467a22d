# Its own policies where it should not follow the namespace's: kept for
# 30 days, at most 50 producers, a consumer holds 1000 unacknowledged
# messages at most. Removing one of them makes the topic follow its
# namespace again.
resource "isobar_topic" "invoices" {
  tenant     = isobar_namespace.payments.tenant
  namespace  = isobar_namespace.payments.name
  name       = "invoices"
  partitions = 4

  retention = {
    time_in_minutes = 43200
    size_in_mb      = -1
  }
  backlog_quota = {
    message_age = {
      limit_time = 86400
      policy     = "producer_exception"
    }
  }
  max_producers                     = 50
  max_unacked_messages_per_consumer = 1000
}

# A topic of its own: two regions only, primary in eu-west whatever the
# namespace's primary.
resource "isobar_topic" "eu_ledger" {
  tenant               = isobar_namespace.payments.tenant
  namespace            = isobar_namespace.payments.name
  name                 = "eu-ledger"
  replication_clusters = ["us-east", "eu-west"]
  primary_region       = "eu-west"
}
