package main

import (
	"context"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFormatVersion(t *testing.T) {
	for _, tc := range []struct {
		settings []debug.BuildSetting
		version  string
		want     string
	}{
		{nil, "", "(devel) (commit unknown)"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.time", Value: "2026-12-07T10:00:00Z"}, {Key: "vcs.modified", Value: "false"}},
			"(devel)", "(devel) (commit 0123456789abcdef, committed 2026-12-07T10:00:00Z, go1.26.8)"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "true"}},
			"v1.2.3", "v1.2.3 (commit 0123456789abcdef, with uncommitted changes, go1.26.8)"},
	} {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: tc.version}, Settings: tc.settings}
		if got := formatVersion(bi); got != tc.want {
			t.Errorf("formatVersion(%v) = %q, want %q", tc.settings, got, tc.want)
		}
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := run(context.Background(), args...)
		if err != nil || !strings.HasPrefix(out, "isobar ") || !strings.Contains(out, "commit") {
			t.Errorf("%v: %q %v", args, out, err)
		}
	}
}
