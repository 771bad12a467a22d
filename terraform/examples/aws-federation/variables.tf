variable "networks" {
  description = <<-EOT
    Each region's network, by AWS region name (us-east-1, eu-west-1 and
    ap-south-1): the VPC, its CIDR, and its subnets (one per availability
    zone, /25 or larger) with their CIDRs. The three VPCs' CIDRs must not
    overlap, must be routed to each other (VPC peering or a transit
    gateway) and need a way out (NAT) for the binary's download.
  EOT
  type = map(object({
    vpc_id   = string
    vpc_cidr = string
    subnets = list(object({
      id   = string
      cidr = string
      az   = optional(string, "")
    }))
  }))
  validation {
    condition     = toset(keys(var.networks)) == toset(["us-east-1", "eu-west-1", "ap-south-1"])
    error_message = "networks needs exactly us-east-1, eu-west-1 and ap-south-1."
  }
}

variable "ami_ids" {
  description = "The hosts' image in each region, by AWS region name (e.g. Amazon Linux 2023; AMI ids differ between regions)."
  type        = map(string)
}

variable "binary_url" {
  description = "Where the hosts download the isobar binary from (reachable from all three regions, e.g. a release asset or a presigned S3 URL)."
  type        = string
}

variable "binary_sha256" {
  description = "The binary's SHA-256 (empty checks nothing)."
  type        = string
  default     = ""
}

variable "client_cidrs" {
  description = "Where Pulsar clients and admin tools (and this OpenTofu run) connect from, on 6650 and 8080."
  type        = list(string)
  default     = []
}

variable "key_name" {
  description = "An EC2 key pair name present in all three regions, or null."
  type        = string
  default     = null
}

variable "admin_urls" {
  description = "The admin REST URLs the isobar provider uses; empty means the three regions' load balancers (known after the first, targeted apply; see README.md)."
  type        = list(string)
  default     = []
}

variable "admin_retry_timeout" {
  description = "How long the isobar provider retries an admin request: long enough for brokers that are still starting."
  type        = string
  default     = "10m"
}

variable "adopt_clusters" {
  description = "Import the cluster records that the regions' brokers write when they first start into isobar_cluster, which then sets their URLs. Turn off only when the records do not exist yet (e.g. to plan before any region runs)."
  type        = bool
  default     = true
}

variable "tags" {
  description = "Tags for every AWS resource."
  type        = map(string)
  default     = { "isobar:federation" = "aws-example" }
}
