// Command isobar is the single Isobar binary: a whole federation for
// development (`isobar dev`), the production components (`isobar bookie`,
// ...) and operator tools (`isobar perf`), one subcommand per file.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "isobar:", err)
		stop()
		os.Exit(exitCode(err))
	}
}
