package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/region"
)

func newStandaloneCmd(g *globalFlags) *cobra.Command {
	var (
		dataDir        string
		host           string
		brokerPort     int
		httpPort       int
		bookies        int
		brokers        int
		maxMessageSize int
		cluster        string
	)
	cmd := &cobra.Command{
		Use:   "standalone",
		Short: "Run one region in one process, like a Pulsar standalone (6650/8080)",
		Long: `Run one region in this process: an embedded etcd metadata store, a
bookie ensemble and brokers, with the Pulsar protocol on --broker-port
(6650) and the admin REST API on --http-port (8080). Cluster "standalone",
tenant "public" and namespace "public/default" exist, and topics are
created on first use, as in a Pulsar standalone. Data lives under
--data-dir; a restart on the same directory keeps it. Ctrl-C stops it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := g.logger()
			if err != nil {
				return err
			}
			if brokers < 1 || brokers > 16 {
				return usageError{fmt.Errorf("--brokers: %d is not within 1..16", brokers)}
			}
			if bookies < 1 || bookies > 16 {
				return usageError{fmt.Errorf("--bookies: %d is not within 1..16", bookies)}
			}
			if maxMessageSize < 1024 || maxMessageSize > 100<<20 {
				return usageError{fmt.Errorf("--max-message-size: %d is not within 1 KiB..100 MiB", maxMessageSize)}
			}
			cfg := region.Config{
				Name:       "standalone",
				Cluster:    cluster,
				DataDir:    dataDir,
				Host:       host,
				Bookies:    bookies,
				Brokers:    brokers,
				BrokerPort: brokerPort,
				HTTPPort:   httpPort,
				Broker:     broker.Config{MaxMessageSize: maxMessageSize},
			}
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			ctx := cmd.Context()
			r, err := region.Start(ctx, cfg, logger)
			if err != nil {
				return err
			}
			defer shutdownRegion(r)
			e := r.Endpoints()
			out := cmd.OutOrStdout()
			for _, b := range e.Brokers {
				fmt.Fprintf(out, "broker: service %s, web %s\n", b.ServiceURL, b.WebServiceURL)
			}
			fmt.Fprintf(out, "metadata %s, data %s\n", e.MetadataURL, dataDir)
			if err := writeJSON(filepath.Join(dataDir, "endpoints.json"), devEndpoints{Regions: []region.Endpoints{e}}); err != nil {
				return err
			}
			fmt.Fprintln(out, "ready. Ctrl-C to stop.")
			<-ctx.Done()
			fmt.Fprintln(out, "stopping")
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&dataDir, "data-dir", "isobar-standalone-data", "directory for all data")
	fl.StringVar(&host, "host", "127.0.0.1", "address to listen on")
	fl.IntVar(&brokerPort, "broker-port", 6650, "Pulsar protocol port of the first broker (others follow)")
	fl.IntVar(&httpPort, "http-port", 8080, "HTTP (admin REST, lookup) port of the first broker (others follow)")
	fl.IntVar(&bookies, "bookies", 3, "number of bookies")
	fl.IntVar(&brokers, "brokers", 1, "number of brokers")
	fl.IntVar(&maxMessageSize, "max-message-size", 1<<20, "largest message accepted, advertised to clients")
	fl.StringVar(&cluster, "cluster", "standalone", "cluster name")
	return cmd
}

// shutdownRegion stops a region, bounded.
func shutdownRegion(r *region.Region) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.Shutdown(ctx)
}
