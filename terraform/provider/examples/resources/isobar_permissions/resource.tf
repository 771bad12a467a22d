# Exactly these roles may use the namespace; a role granted any other way
# shows as drift and the next apply revokes it.
resource "isobar_permissions" "payments" {
  namespace = isobar_namespace.payments.id
  grants = {
    "billing"  = ["consume"]
    "checkout" = ["produce", "consume"]
  }
}
