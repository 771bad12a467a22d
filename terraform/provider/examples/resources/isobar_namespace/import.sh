tofu import isobar_namespace.payments acme/payments
