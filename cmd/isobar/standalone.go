package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/region"
)

func newStandaloneCmd(g *globalFlags) *cobra.Command {
	rc := &roleCmd{g: g}
	// Transactions are on, as in a Pulsar standalone; the file
	// (broker.transactions.enabled) or the environment turns them off.
	rc.file.Broker.Transactions.Enabled = true
	var (
		dataDir        string
		host           string
		brokerPort     int
		httpPort       int
		bookies        int
		brokers        int
		maxMessageSize int
		cluster        string
		secure         bool
		tlsPort        int
		httpsPort      int
	)
	cmd := &cobra.Command{
		Use:   "standalone",
		Short: "Run one region in one process, like a Pulsar standalone (6650/8080)",
		Long: `Run one region in this process: an embedded etcd metadata store, a
bookie ensemble and brokers, with the Pulsar protocol on --broker-port
(6650) and the admin REST API on --http-port (8080). Cluster "standalone",
tenant "public" and namespace "public/default" exist, and topics are
created on first use, as in a Pulsar standalone. Transactions are on (the
coordinator is placed by namespace "pulsar/system", which exists too);
broker.transactions.enabled: false in the file turns them off. Data lives under
--data-dir; a restart on the same directory keeps every topic and
subscription. Ctrl-C (SIGTERM) stops it gracefully, a second one at once.
The endpoints are written to <data-dir>/endpoints.json.

With --secure, the brokers serve only TLS (pulsar+ssl:// on --broker-tls-port,
6651, https:// on --https-port, 8443) and require tokens, and etcd and the
bookies require certificates: a CA, the certificates and a superuser
token are made under <data-dir>/secrets (reused on restart), and
endpoints.json names the TLS URLs, the CA file and the token file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := rc.load(cmd); err != nil {
				return err
			}
			var errs []error
			if brokers < 1 || brokers > 16 {
				errs = append(errs, fmt.Errorf("--brokers: %d is not within 1..16", brokers))
			}
			if bookies < 1 || bookies > 16 {
				errs = append(errs, fmt.Errorf("--bookies: %d is not within 1..16", bookies))
			}
			if maxMessageSize < 1024 || maxMessageSize > 100<<20 {
				errs = append(errs, fmt.Errorf("--max-message-size: %d is not within 1 KiB..100 MiB", maxMessageSize))
			}
			cfg := rc.file.RegionConfig()
			cfg.Name, cfg.Cluster, cfg.DataDir, cfg.Host = "standalone", cluster, dataDir, host
			cfg.Bookies, cfg.Brokers, cfg.BrokerPort, cfg.HTTPPort = bookies, brokers, brokerPort, httpPort
			cfg.Broker.MaxMessageSize = maxMessageSize
			cfg.BrokerTLSPort, cfg.HTTPSPort = tlsPort, httpsPort
			// The whole configuration is checked before the secrets are
			// made: a bad one leaves nothing on disk.
			if err := validate(append(errs, cfg.Validate())...); err != nil {
				return err
			}
			if secure {
				var err error
				if cfg.Secrets, err = ensureSecrets(dataDir, []string{cfg.Name}, host); err != nil {
					return err
				}
			}
			if err := validate(cfg.Validate()); err != nil {
				return err
			}
			p := process{role: "standalone", name: "standalone", region: "standalone", identity: []any{"dataDir", dataDir}}
			return rc.runRegion(cmd, p, cfg, func(e region.Endpoints) {
				for _, b := range e.Brokers {
					if b.ServiceURLTLS != "" && secure {
						logf(cmd, "broker: service %s, web %s (TLS only)", b.ServiceURLTLS, b.WebServiceURLTLS)
						continue
					}
					logf(cmd, "broker: service %s, web %s", b.ServiceURL, b.WebServiceURL)
				}
				logf(cmd, "metadata %s, data %s", e.MetadataURL, dataDir)
			})
		},
	}
	rc.bind(cmd)
	fl := cmd.Flags()
	fl.StringVar(&dataDir, "data-dir", "isobar-standalone-data", "directory for all data")
	fl.StringVar(&host, "host", "127.0.0.1", "address to listen on")
	fl.IntVar(&brokerPort, "broker-port", 6650, "Pulsar protocol port of the first broker (others follow)")
	fl.IntVar(&httpPort, "http-port", 8080, "HTTP (admin REST, lookup) port of the first broker (others follow)")
	fl.IntVar(&bookies, "bookies", 3, "number of bookies")
	fl.IntVar(&brokers, "brokers", 1, "number of brokers")
	fl.IntVar(&maxMessageSize, "max-message-size", 1<<20, "largest message accepted, advertised to clients")
	fl.StringVar(&cluster, "cluster", "standalone", "cluster name")
	fl.BoolVar(&secure, "secure", false, secureUsage)
	fl.IntVar(&tlsPort, "broker-tls-port", 6651, "Pulsar protocol TLS port of the first broker, when it serves TLS (others follow)")
	fl.IntVar(&httpsPort, "https-port", 8443, "HTTPS port of the first broker, when it serves TLS (others follow)")
	return cmd
}
