data "isobar_permissions" "payments" {
  namespace = "acme/payments"
}
