package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/internal/diskperf"
)

func newPerfCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "perf",
		Short: "Measure performance: the disk, and produce/consume throughput and latency",
	}
	var dir string
	var dur time.Duration
	var asJSON bool
	disk := &cobra.Command{
		Use:   "disk",
		Short: "Measure a disk's fdatasync rate, sequential write bandwidth and cold sequential read bandwidth",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dur <= 0 {
				return usageError{fmt.Errorf("--duration: %v must be positive", dur)}
			}
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				return usageError{fmt.Errorf("--dir: %q is not a directory", dir)}
			}
			r, err := diskperf.Measure(dir, dur)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(r)
			}
			fmt.Fprintln(cmd.OutOrStdout(), r)
			return nil
		},
	}
	disk.Flags().StringVar(&dir, "dir", ".", "directory on the disk to measure")
	disk.Flags().DurationVar(&dur, "duration", 2*time.Second, "time per phase")
	disk.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(disk)
	return cmd
}
