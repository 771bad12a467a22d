data "isobar_topic" "invoices" {
  tenant    = "acme"
  namespace = "payments"
  name      = "invoices"
}
