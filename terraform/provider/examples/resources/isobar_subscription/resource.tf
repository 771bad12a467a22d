# Kept from the first message on, before any consumer connects.
resource "isobar_subscription" "billing" {
  topic            = isobar_topic.invoices.id
  name             = "billing"
  initial_position = "earliest"
}
