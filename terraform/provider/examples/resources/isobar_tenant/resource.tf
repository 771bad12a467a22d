resource "isobar_tenant" "acme" {
  name             = "acme"
  admin_roles      = ["acme-admin"]
  allowed_clusters = ["us-east", "eu-west", "ap-south"]
}
