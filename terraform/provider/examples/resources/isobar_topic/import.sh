tofu import isobar_topic.invoices persistent://acme/payments/invoices
