package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/internal/config"
	"github.com/isobar-mq/isobar/internal/lifecycle"
	"github.com/isobar-mq/isobar/observability"
	"github.com/isobar-mq/isobar/region"
	"github.com/isobar-mq/isobar/roles"
)

// Every role command (metastore, bookie, broker, replicator, nats,
// region, standalone, dev) runs the same way: the configuration file
// (--config, the shape of region.File) overridden by ISOBAR_* variables
// and then by flags; one component driven by lifecycle.Runner, so SIGTERM
// drains, a second signal or the shutdown deadline aborts, and /healthz,
// /readyz and /metrics are served; a bad start exits with status 2.

// roleCmd is what the role commands share.
type roleCmd struct {
	g    *globalFlags
	path string
	file region.File
}

// bind adds --config to cmd.
func (rc *roleCmd) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&rc.path, "config", "", "YAML configuration file (see docs/config.md)")
}

// load fills rc.file from the file, the environment and the flags.
func (rc *roleCmd) load(cmd *cobra.Command) error {
	if err := config.Load(rc.path, &rc.file, cmd.Flags(), os.Environ()); err != nil {
		return usageError{err}
	}
	return nil
}

// process is one role's process.
type process struct {
	role     string // "broker", "bookie", ...
	name     string // the component's stable name (for telemetry and logs)
	region   string
	httpAddr string // the runner's own health server; "" none
	identity []any  // more key/values for the start-up log line
}

// regionDeps are a process's dependencies as a region composition takes
// them.
func regionDeps(d roles.Deps) region.Deps {
	return region.Deps{Logger: d.Logger, Telemetry: d.Telemetry, Health: d.Health}
}

// run builds the process's telemetry and logger, then the component with
// them, and runs it until a signal. ready, when set, is called once the
// component serves.
func (rc *roleCmd) run(ctx context.Context, p process, build func(roles.Deps) lifecycle.Component, ready func()) error {
	logger, err := rc.g.logger()
	if err != nil {
		return err
	}
	logger = logger.With("role", p.role)
	tel, err := observability.New(ctx, observability.Config{
		Region: p.region, Component: p.role, Instance: p.name,
		Disabled: rc.file.Telemetry.Disabled, Logger: logger,
	})
	if err != nil {
		return err
	}
	defer tel.Shutdown(context.WithoutCancel(ctx))
	health := lifecycle.NewHealth(tel.Handler())
	deps := roles.Deps{Logger: logger, Telemetry: tel, Health: health}
	c := build(deps)
	readyCh := make(chan struct{})
	stopped := make(chan struct{})
	defer close(stopped)
	if ready != nil {
		go func() {
			select {
			case <-readyCh:
				ready()
			case <-stopped:
			}
		}()
	}
	r := &lifecycle.Runner{
		Logger:          logger,
		Identity:        append(identity(p), p.identity...),
		HTTPAddr:        p.httpAddr,
		Health:          health,
		ShutdownTimeout: rc.file.ShutdownTimeout,
		Ready:           readyCh,
	}
	// The command's context ends at the first signal (main) or when a
	// test cancels it: a drain. The runner also takes the signals itself,
	// so a second one aborts (the first reaches it twice, within
	// lifecycle.DuplicateSignalWindow, and counts once).
	err = r.Run(ctx, c)
	return startError(err)
}

// identity is the key/values a process logs when it starts.
func identity(p process) []any {
	out := []any{"name", p.name}
	if p.region != "" {
		out = append(out, "region", p.region)
	}
	return append(out, "version", version())
}

// startError marks the errors of a bad start (a port in use, whichever
// part meets it, the embedded etcd included; a metadata store that does
// not answer; a bookie whose directories do not match its identity) as
// usage errors: exit status 2, nothing touched.
func startError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, roles.ErrListen), errors.Is(err, lifecycle.ErrListen), errors.Is(err, syscall.EADDRINUSE),
		errors.Is(err, roles.ErrUnreachable), badIdentity(err):
		return usageError{err}
	}
	return err
}

// validate wraps a configuration error as a usage error.
func validate(errs ...error) error {
	if err := errors.Join(errs...); err != nil {
		return usageError{err}
	}
	return nil
}

// logf prints a line for the operator on stdout.
func logf(cmd *cobra.Command, format string, args ...any) {
	fmt.Fprintf(cmd.OutOrStdout(), format+"\n", args...)
}
