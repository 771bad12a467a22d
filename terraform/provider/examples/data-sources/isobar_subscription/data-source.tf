data "isobar_subscription" "billing" {
  topic = "persistent://acme/payments/invoices"
  name  = "billing"
}
