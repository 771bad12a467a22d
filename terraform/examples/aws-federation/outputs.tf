output "service_urls" {
  description = "Each region's Pulsar service URL (its load balancer)."
  value       = { for r, m in local.clusters : r => m.service_url }
}

output "web_service_urls" {
  description = "Each region's admin REST URL (its load balancer)."
  value       = { for r, m in local.clusters : r => m.web_service_url }
}

output "global_store" {
  description = "The global configuration store: its client endpoints and initial cluster."
  value       = local.global_store
}

output "nats_gateways" {
  description = "Each region's NATS gateway URL."
  value       = local.gateways
}

output "instance_ids" {
  description = "Every region's instances, by region and host."
  value       = { for r, m in local.clusters : r => m.instance_ids }
}

output "namespace" {
  description = "The namespace replicated to every region."
  value       = isobar_namespace.replicated.id
}
