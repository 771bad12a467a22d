# Declare a region before it runs (a running region registers its own
# cluster with its brokers' and NATS server's URLs).
resource "isobar_cluster" "sa_east" {
  name               = "sa-east"
  service_url        = "http://sa-east-broker-1:8080"
  broker_service_url = "pulsar://sa-east-broker-1:6650,sa-east-broker-2:6650"
  nats_url           = "nats://sa-east-nats:4222"
}
