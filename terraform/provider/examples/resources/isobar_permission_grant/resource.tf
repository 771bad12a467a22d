# The billing service may read every topic of the namespace...
resource "isobar_permission_grant" "billing_reads" {
  namespace = isobar_namespace.payments.id
  role      = "billing"
  actions   = ["consume"]
}

# ...and publish to the invoices topic only (its partitions included).
resource "isobar_permission_grant" "billing_writes_invoices" {
  topic   = isobar_topic.invoices.id
  role    = "billing"
  actions = ["produce"]
}
