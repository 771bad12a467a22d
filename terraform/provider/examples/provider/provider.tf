terraform {
  required_providers {
    isobar = {
      source = "isobar-mq/isobar"
    }
  }
}

# Any region serves the whole federation's configuration: list several so
# that the next is used when one cannot be reached.
provider "isobar" {
  web_service_url = ["http://127.0.0.1:8080", "http://127.0.0.1:8180", "http://127.0.0.1:8280"]
}
