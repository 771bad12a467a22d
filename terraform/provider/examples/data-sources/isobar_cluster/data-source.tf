data "isobar_cluster" "us_east" {
  name = "us-east"
}

output "us_east_brokers" {
  value = data.isobar_cluster.us_east.broker_service_url
}
