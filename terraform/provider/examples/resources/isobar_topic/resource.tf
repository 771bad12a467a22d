resource "isobar_topic" "invoices" {
  tenant     = isobar_namespace.payments.tenant
  namespace  = isobar_namespace.payments.name
  name       = "invoices"
  partitions = 4
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
