tofu import isobar_tenant.acme acme
