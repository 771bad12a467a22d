data "isobar_namespace" "payments" {
  tenant = "acme"
  name   = "payments"
}

output "payments_primary" {
  value = data.isobar_namespace.payments.primary_region
}
