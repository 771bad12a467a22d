package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit it was built from and when that was committed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), "isobar", versionLine())
			return nil
		},
	}
}

// versionLine is what `isobar version` and `isobar --version` print after
// the name: the module version ("(devel)" for a build from a work tree),
// then the commit, its time and whether the tree had changes, as the Go
// toolchain stamps them (go build in a git checkout; go run and go test
// do not stamp them, so they print "commit unknown").
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel) (commit unknown)"
	}
	return formatVersion(bi)
}

func formatVersion(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	rev := settings["vcs.revision"]
	if rev == "" {
		return v + " (commit unknown)"
	}
	out := v + " (commit " + rev
	if t := settings["vcs.time"]; t != "" {
		out += ", committed " + t
	}
	if settings["vcs.modified"] == "true" {
		out += ", with uncommitted changes"
	}
	return out + ", " + bi.GoVersion + ")"
}

// version is the short form for logs: the module version, or the commit
// (12 digits, "+dirty" with uncommitted changes) of a work-tree build.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	v := bi.Main.Version
	if v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return "(devel)"
	}
	return rev[:min(12, len(rev))] + dirty
}
