// Package provider is terraform-provider-isobar: Terraform (and OpenTofu)
// resources and data sources for an Isobar federation's clusters,
// tenants, namespaces, topics, subscriptions and permission grants,
// managed through the admin REST API of any region (docs/admin.md).
// terraform/README.md shows how to use it; docs/ beside this file
// documents every resource.
package provider

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/isobar-mq/isobar/terraform/provider/client"
)

// Environment variables that stand in for provider settings left out of
// the configuration.
const (
	EnvWebServiceURL       = "ISOBAR_WEB_SERVICE_URL" // comma-separated
	EnvToken               = "ISOBAR_TOKEN"
	EnvTokenFile           = "ISOBAR_TOKEN_FILE"
	EnvTLSTrustCertsFile   = "ISOBAR_TLS_TRUST_CERTS_FILE"
	EnvTLSAllowInsecure    = "ISOBAR_TLS_ALLOW_INSECURE_CONNECTION"
	EnvRetryTimeout        = "ISOBAR_RETRY_TIMEOUT"
	defaultProviderVersion = "dev"
)

// New returns a constructor of the provider, as providerserver wants it.
// version is reported to Terraform ("dev" when empty).
func New(version string) func() provider.Provider {
	if version == "" {
		version = defaultProviderVersion
	}
	return func() provider.Provider { return &isobarProvider{version: version} }
}

type isobarProvider struct{ version string }

type providerModel struct {
	WebServiceURL              types.List   `tfsdk:"web_service_url"`
	Token                      types.String `tfsdk:"token"`
	TokenFile                  types.String `tfsdk:"token_file"`
	TLSTrustCertsFile          types.String `tfsdk:"tls_trust_certs_file"`
	TLSAllowInsecureConnection types.Bool   `tfsdk:"tls_allow_insecure_connection"`
	RetryTimeout               types.String `tfsdk:"retry_timeout"`
}

func (p *isobarProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "isobar"
	resp.Version = p.version
}

func (p *isobarProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Manages an Isobar federation's clusters, tenants, namespaces, topics, subscriptions and permission grants through the admin REST API of its regions.",
		Attributes: map[string]schema.Attribute{
			"web_service_url": schema.ListAttribute{
				ElementType: types.StringType,
				Optional:    true,
				MarkdownDescription: "Admin REST URLs (`http://host:8080`), one or more regions' brokers. Every request goes to the URL that last answered, " +
					"starting with the first; when a URL cannot be reached the next one is tried. Any region serves the whole federation's " +
					"configuration. Default: `" + EnvWebServiceURL + "` (comma-separated).",
			},
			"token": schema.StringAttribute{
				Optional:  true,
				Sensitive: true,
				MarkdownDescription: "Bearer token sent with every request (`Authorization: Bearer ...`), also after a broker redirects it, and to " +
					"the other regions the provider reaches for subscriptions. Brokers with authentication on (docs/security.md) require it: a " +
					"superuser's, or a tenant admin's for that tenant's objects. Default: `" + EnvToken + "`. Conflicts with `token_file`.",
			},
			"token_file": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "File holding the bearer token (surrounding whitespace is dropped). Default: `" + EnvTokenFile + "`.",
			},
			"tls_trust_certs_file": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "PEM file of the CA certificates that https URLs are verified with, instead of the system's. Default: `" + EnvTLSTrustCertsFile + "`.",
			},
			"tls_allow_insecure_connection": schema.BoolAttribute{
				Optional:            true,
				MarkdownDescription: "Accept any server certificate on https URLs (testing only). Default: `" + EnvTLSAllowInsecure + "`, else false.",
			},
			"retry_timeout": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "How long one admin request is retried (a Go duration, e.g. `30s`): unreachable URLs, 503s, concurrent modifications, " +
					"and the races named on each resource. Default: `" + EnvRetryTimeout + "`, else `30s`.",
			},
		},
	}
}

func (p *isobarProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	for _, a := range []struct {
		name    string
		unknown bool
	}{
		{"web_service_url", m.WebServiceURL.IsUnknown()},
		{"token", m.Token.IsUnknown()},
		{"token_file", m.TokenFile.IsUnknown()},
		{"tls_trust_certs_file", m.TLSTrustCertsFile.IsUnknown()},
		{"tls_allow_insecure_connection", m.TLSAllowInsecureConnection.IsUnknown()},
		{"retry_timeout", m.RetryTimeout.IsUnknown()},
	} {
		if a.unknown {
			resp.Diagnostics.AddAttributeError(path.Root(a.name), "Unknown provider setting",
				a.name+" depends on a value known only after apply; the provider needs it to plan. Set it from values known at plan time.")
		}
	}
	if resp.Diagnostics.HasError() {
		return
	}
	cfg := client.Config{
		UserAgent: "terraform-provider-isobar/" + p.version,
		OnRetry: func(ctx context.Context, r client.Request, err error, wait time.Duration) {
			tflog.Debug(ctx, "retrying an admin request", map[string]any{"method": r.Method, "path": r.Path, "error": err.Error(), "wait": wait.String()})
		},
	}

	var urls []string
	resp.Diagnostics.Append(m.WebServiceURL.ElementsAs(ctx, &urls, false)...)
	if len(urls) == 0 {
		for _, u := range strings.Split(os.Getenv(EnvWebServiceURL), ",") {
			if u = strings.TrimSpace(u); u != "" {
				urls = append(urls, u)
			}
		}
	}
	if len(urls) == 0 {
		resp.Diagnostics.AddAttributeError(path.Root("web_service_url"), "No web service URL",
			"Set web_service_url in the provider block or "+EnvWebServiceURL+" in the environment.")
	}
	cfg.URLs = urls

	token := orEnv(m.Token, EnvToken)
	tokenFile := orEnv(m.TokenFile, EnvTokenFile)
	switch {
	case token != "" && tokenFile != "":
		resp.Diagnostics.AddAttributeError(path.Root("token"), "Conflicting settings", "Set token or token_file, not both.")
	case tokenFile != "":
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("token_file"), "Cannot read the token file", err.Error())
		}
		cfg.Token = strings.TrimSpace(string(b))
	default:
		cfg.Token = token
	}

	insecure := false
	if !m.TLSAllowInsecureConnection.IsNull() {
		insecure = m.TLSAllowInsecureConnection.ValueBool()
	} else if s := os.Getenv(EnvTLSAllowInsecure); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("tls_allow_insecure_connection"), "Bad "+EnvTLSAllowInsecure, err.Error())
		}
		insecure = b
	}
	if ca := orEnv(m.TLSTrustCertsFile, EnvTLSTrustCertsFile); ca != "" || insecure {
		t := &tls.Config{InsecureSkipVerify: insecure, MinVersion: tls.VersionTLS12}
		if ca != "" {
			pem, err := os.ReadFile(ca)
			pool := x509.NewCertPool()
			switch {
			case err != nil:
				resp.Diagnostics.AddAttributeError(path.Root("tls_trust_certs_file"), "Cannot read the CA file", err.Error())
			case !pool.AppendCertsFromPEM(pem):
				resp.Diagnostics.AddAttributeError(path.Root("tls_trust_certs_file"), "No certificate in the CA file", ca+" holds no PEM certificate.")
			}
			t.RootCAs = pool
		}
		cfg.TLS = t
	}

	if s := orEnv(m.RetryTimeout, EnvRetryTimeout); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			resp.Diagnostics.AddAttributeError(path.Root("retry_timeout"), "Bad retry_timeout", fmt.Sprintf("%q: want a non-negative Go duration such as 30s", s))
		}
		cfg.RetryTimeout = d
		if d == 0 {
			cfg.RetryTimeout = -1 // no retries
		}
	}
	if resp.Diagnostics.HasError() {
		return
	}
	c, err := client.New(cfg)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("web_service_url"), "Bad web service URL", err.Error())
		return
	}
	resp.ResourceData = c
	resp.DataSourceData = c
}

func orEnv(v types.String, env string) string {
	if !v.IsNull() {
		return v.ValueString()
	}
	return os.Getenv(env)
}

func (p *isobarProvider) Resources(context.Context) []func() resource.Resource {
	var out []func() resource.Resource
	for _, k := range kinds {
		out = append(out, k.resource)
	}
	return out
}

func (p *isobarProvider) DataSources(context.Context) []func() datasource.DataSource {
	var out []func() datasource.DataSource
	for _, k := range kinds {
		out = append(out, k.dataSource)
	}
	return out
}
