package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/internal/atomicfile"
	"github.com/isobar-mq/isobar/internal/lifecycle"
	"github.com/isobar-mq/isobar/internal/secrets"
	"github.com/isobar-mq/isobar/region"
	"github.com/isobar-mq/isobar/roles"
)

// devControlShift places the dev fault-control API in region 0's port
// block, where the plan leaves +12..+19 free.
const devControlShift = 12

// The namespace `dev` creates replicated across every region.
const (
	devTenant    = "geo"
	devNamespace = "replicated"
)

type devEndpoints struct {
	Regions []region.Endpoints `json:"regions"`
	// ControlURL is the fault-control API (kill, start, partition,
	// blackhole, heal a region) for failover drills.
	ControlURL string `json:"controlUrl,omitempty"`
	// CAFile and TokenFile (--secure) are the CA the brokers'
	// certificates chain to and a superuser token.
	CAFile    string `json:"caFile,omitempty"`
	TokenFile string `json:"tokenFile,omitempty"`
}

// secureUsage is the help of dev's and standalone's --secure.
const secureUsage = "serve only TLS with token authentication: a CA, certificates and a superuser token are made under <data-dir>/secrets (reused on restart)"

// ensureSecrets makes or reuses the secrets of regions under
// <dataDir>/secrets, for --secure.
func ensureSecrets(dataDir string, regions []string, host string) (*secrets.Files, error) {
	var hosts []string
	if host != "" && host != "127.0.0.1" && host != "localhost" && host != "0.0.0.0" {
		hosts = append(hosts, host)
	}
	f, err := secrets.Ensure(filepath.Join(dataDir, "secrets"), regions, hosts)
	if err != nil {
		return nil, err
	}
	return &f, nil
}

// secureEndpoints adds the secure federation's client files to eps.
func (eps *devEndpoints) secure(f *secrets.Files) {
	if f == nil {
		return
	}
	eps.CAFile, eps.TokenFile = absPath(f.CA), absPath(f.SuperUserToken)
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

func newDevCmd(g *globalFlags) *cobra.Command {
	rc := &roleCmd{g: g}
	var (
		regions  string
		dataDir  string
		basePort int
		bookies  int
		wanDelay time.Duration
		control  string
		secure   bool
		txns     bool
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a whole federation in one process (global store; per region etcd, bookies, a broker, NATS and a replicator)",
		Long: `Run a development federation: for each region an embedded etcd
metadata store, a bookie ensemble and a broker (Pulsar protocol and admin
REST API), all in this process, data under --data-dir (restart keeps it).
Prints every endpoint and writes them to <data-dir>/endpoints.json. Ctrl-C
stops it cleanly.

The regions share a global configuration store (an embedded etcd) and
an embedded NATS super-cluster (one server per region, joined by gateways);
replicator workers copy every topic of public/default and geo/replicated
to every other region.

With --wan-latency, every link between regions (NATS gateways) and from
each region to the global store runs through an emulated WAN (a userspace
proxy in this process) with that one-way delay.

With --secure, every link is secured (docs/security.md): a CA, the
certificates of every part and a superuser token are made under
<data-dir>/secrets (and reused on the next start); brokers serve only TLS
(pulsar+ssl://, https://) and require tokens; etcd, bookies and NATS
require certificates of their region's CA. endpoints.json then names the
TLS URLs, the CA file and the token file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			names, err := parseRegions(regions)
			if err != nil {
				return usageError{err}
			}
			if err := region.CheckPlan(basePort, len(names)); err != nil {
				return usageError{fmt.Errorf("--base-port: %w", err)}
			}
			if bookies < 1 || bookies > region.MaxBookies {
				return usageError{fmt.Errorf("--bookies: %d is not within 1..%d", bookies, region.MaxBookies)}
			}
			fc := region.FederationConfig{
				GlobalDir:  filepath.Join(dataDir, "global"),
				BasePort:   basePort,
				Namespaces: []string{devTenant + "/" + devNamespace},
			}
			if cmd.Flags().Changed("wan-latency") {
				if wanDelay < 0 || wanDelay > 10*time.Second {
					return usageError{fmt.Errorf("--wan-latency: %v is not within 0..10s", wanDelay)}
				}
				fc.WAN = &region.WANConfig{Latency: wanDelay}
			}
			for _, name := range names {
				rcfg := region.Config{Name: name, DataDir: filepath.Join(dataDir, name), Bookies: bookies}
				rcfg.Broker.Transactions.Enabled = txns
				fc.Regions = append(fc.Regions, rcfg)
			}
			if _, err := rc.g.logger(); err != nil {
				return err
			}
			// Every port of the plan is free before anything starts or
			// is written: a taken one names the flag that moves them all.
			ports := region.PlannedPorts(basePort, len(names), bookies, 1, secure)
			if !cmd.Flags().Changed("control-addr") {
				ports = append(ports, basePort+devControlShift)
			}
			if busy := region.PortsInUse("127.0.0.1", ports); len(busy) > 0 {
				hint := "every port of the plan moves with --base-port"
				if region.CheckPlan(basePort+1000, len(names)) == nil {
					hint += fmt.Sprintf(", e.g. --base-port %d", basePort+1000)
				}
				return usageError{fmt.Errorf("--base-port %d: port %s already in use (another isobar dev?); %s", basePort, joinInts(busy), hint)}
			}
			if secure {
				if fc.Secrets, err = ensureSecrets(dataDir, names, ""); err != nil {
					return err
				}
			}
			if !cmd.Flags().Changed("control-addr") {
				control = fmt.Sprintf("127.0.0.1:%d", basePort+devControlShift)
			}
			var f *region.Federation
			var ctl *devControl
			p := process{role: "dev", name: "dev", identity: []any{"regions", names, "dataDir", dataDir, "basePort", basePort}}
			return rc.run(cmd.Context(), p, func(d roles.Deps) lifecycle.Component {
				d.Health = nil // each region's brokers serve their own region's health
				f = region.NewFederation(fc, regionDeps(d))
				g := lifecycle.NewGroup("dev")
				g.Add(f)
				if control != "" {
					ctl = &devControl{addr: control, f: f}
					g.Add(ctl)
				}
				return g
			}, func() {
				out := cmd.OutOrStdout()
				var eps devEndpoints
				if ctl != nil {
					eps.ControlURL = ctl.URL()
					fmt.Fprintf(out, "fault control (kill, start, partition, blackhole, heal a region): %s/regions\n", eps.ControlURL)
				}
				for _, r := range f.Regions {
					eps.Regions = append(eps.Regions, r.Endpoints())
				}
				eps.secure(fc.Secrets)
				fmt.Fprintf(out, "global configuration store: %s\n", strings.Join(f.GlobalEndpoints(), " "))
				if w := f.WAN(); w != nil {
					fmt.Fprintf(out, "emulated WAN, %v one way: %s\n", wanDelay, strings.Join(w.Links(), " "))
				}
				for _, e := range eps.Regions {
					if e.ServiceURLTLS != "" {
						fmt.Fprintf(out, "region %s: service %s, web %s (TLS only), metrics %s, nats %s, metadata %s, bookies %s\n", e.Name, e.ServiceURLTLS, e.WebServiceURLTLS, e.MetricsURL, e.NATSURL, e.MetadataURL, strings.Join(e.Bookies, " "))
						continue
					}
					fmt.Fprintf(out, "region %s: service %s, web %s, metrics %s, nats %s, metadata %s, bookies %s\n", e.Name, e.ServiceURL, e.WebServiceURL, e.MetricsURL, e.NATSURL, e.MetadataURL, strings.Join(e.Bookies, " "))
				}
				var consoles []string
				for _, e := range eps.Regions {
					web := e.WebServiceURL
					if e.WebServiceURLTLS != "" {
						web = e.WebServiceURLTLS
					}
					consoles = append(consoles, strings.TrimRight(web, "/")+"/console/")
				}
				fmt.Fprintf(out, "console (docs/console.md): %s\n", strings.Join(consoles, " "))
				if eps.CAFile != "" {
					fmt.Fprintf(out, "clients: trust %s, authenticate with the superuser token in %s\n", eps.CAFile, eps.TokenFile)
				}
				path := filepath.Join(dataDir, "endpoints.json")
				if err := writeJSON(path, eps); err != nil {
					fmt.Fprintf(out, "could not write %s: %v\n", path, err)
					return
				}
				fmt.Fprintf(out, "endpoints written to %s\n", path)
				fmt.Fprintf(out, "namespaces public/default and %s/%s replicate across %s. Ctrl-C to stop.\n", devTenant, devNamespace, strings.Join(names, ", "))
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&regions, "regions", "us-east,eu-west", "region names, comma-separated")
	fl.StringVar(&dataDir, "data-dir", "isobar-dev-data", "directory for all data")
	fl.IntVar(&basePort, "base-port", 6650, "first port; region i uses base-port+100*i and up")
	fl.IntVar(&bookies, "bookies", 3, "bookies per region")
	fl.DurationVar(&wanDelay, "wan-latency", 0, "run links between regions through an emulated WAN with this one-way delay (e.g. 40ms)")
	fl.BoolVar(&secure, "secure", false, secureUsage)
	fl.BoolVar(&txns, "transactions", true, "serve Pulsar transactions (each region's coordinators are placed by namespace pulsar/system)")
	fl.StringVar(&control, "control-addr", "", "address of the fault-control API for failover drills (default 127.0.0.1:<base-port+12>; empty: none)")
	return cmd
}

// joinInts prints ports as "6650, 6651".
func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

func parseRegions(s string) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if !roles.ValidName(n) {
			return nil, fmt.Errorf("--regions: %q is not a valid region name (lower-case letters, digits, dashes)", n)
		}
		if seen[n] {
			return nil, fmt.Errorf("--regions: %q given twice", n)
		}
		seen[n] = true
		names = append(names, n)
	}
	if len(names) == 0 {
		return nil, errors.New("--regions: at least one region is required")
	}
	return names, nil
}

// writeJSON writes v atomically (package atomicfile), making the
// directory if needed.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, append(b, '\n'), 0o644)
}
