tofu import isobar_subscription.billing persistent://acme/payments/invoices/billing
