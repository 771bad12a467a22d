data "isobar_tenant" "acme" {
  name = "acme"
}
