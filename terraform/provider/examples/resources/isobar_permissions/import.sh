tofu import isobar_permissions.payments acme/payments
