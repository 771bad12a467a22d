data "isobar_permission_grant" "billing_writes_invoices" {
  topic = "persistent://acme/payments/invoices"
  role  = "billing"
}
