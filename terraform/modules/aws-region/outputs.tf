output "service_url" {
  description = "The region's Pulsar service URL, through the load balancer."
  value       = "pulsar://${aws_lb.brokers.dns_name}:6650"
}

output "web_service_url" {
  description = "The region's admin REST URL, through the load balancer."
  value       = "http://${aws_lb.brokers.dns_name}:8080"
}

output "broker_web_urls" {
  description = "Every broker's admin REST URL by its fixed address: known at plan time, unlike the load balancer's name."
  value       = [for name in local.brokers : "http://${local.instances[name].address}:8080"]
}

output "lb_dns_name" {
  description = "The network load balancer's DNS name."
  value       = aws_lb.brokers.dns_name
}

output "nats_url" {
  description = "The region's NATS servers' client URLs."
  value       = module.config.nats_url
}

output "nats_gateway_url" {
  description = "The gateway URL of the region's first NATS server, for the other regions' peer_gateways."
  value       = local.nats_gateway_url
}

output "metastore_endpoints" {
  description = "The region's metadata store (etcd) client URLs."
  value       = module.config.metastore_endpoints
}

output "global_endpoints" {
  description = "The client URLs of this region's global store members (empty unless global_member)."
  value       = local.global_endpoints
}

output "global_peers" {
  description = "This region's global store members' peer URLs by member name (<region>-<host>), for the store's initial_cluster."
  value       = local.global_peers
}

output "hosts" {
  description = "Every host's role and fixed private address, by host name."
  value       = { for name, h in local.instances : name => { role = h.role, address = h.address, subnet_id = h.subnet_id } }
}

output "instance_ids" {
  description = "The EC2 instance ids by host name."
  value       = { for name, i in aws_instance.host : name => i.id }
}

output "security_group_id" {
  description = "The hosts' security group."
  value       = aws_security_group.hosts.id
}
