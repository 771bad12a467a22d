package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// usageError marks bad flags, arguments or configuration: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

type globalFlags struct {
	logLevel  string
	logFormat string
}

func newRootCmd() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:           "isobar",
		Short:         "Isobar: a geo-replicated, Pulsar-compatible messaging federation",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", envOr("ISOBAR_LOG_LEVEL", "info"), "log level: debug, info, warn, error")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", envOr("ISOBAR_LOG_FORMAT", "text"), "log format: text or json")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newDevCmd(g), newStandaloneCmd(g), newRegionCmd(g), newMetastoreCmd(g), newBookieCmd(g),
		newBrokerCmd(g), newProxyCmd(g), newReplicatorCmd(g), newNATSCmd(g), withPulsarPerf(newPerfCmd(g), g), newClientCmd(g), newAdminCmd(), newVersionCmd(), newProbeCmd())
	root.AddCommand(newDrillCmd(g), newFaultControlCmd(g), newTokensCmd(), newSecretsCmd())
	return root
}

// logger builds the process logger on stderr from the global flags.
func (g *globalFlags) logger() (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, usageError{fmt.Errorf("--log-level: %q is not debug, info, warn or error", g.logLevel)}
	}
	opts := &slog.HandlerOptions{Level: lvl}
	var w io.Writer = os.Stderr
	switch strings.ToLower(g.logFormat) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageError{fmt.Errorf("--log-format: %q is not text or json", g.logFormat)}
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}
