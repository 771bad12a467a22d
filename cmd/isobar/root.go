package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
	root.Version = versionLine()
	root.SetVersionTemplate("isobar {{.Version}}\n")
	nounsSuggest(root)
	return root
}

// nounsSuggest makes every command that only holds others (the root, the
// nouns) answer a missing or unknown command with a usage error that
// names the closest commands, instead of cobra's help text or the whole
// list of verbs.
func nounsSuggest(c *cobra.Command) {
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && !cmd.HasParent() {
				return cmd.Help()
			}
			return unknownCommand(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		nounsSuggest(sub)
	}
}

// unknownCommand is the usage error of a noun given no verb or one it
// does not have: a few close names, or a pointer to --help.
func unknownCommand(cmd *cobra.Command, args []string) error {
	var verbs []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			verbs = append(verbs, c.Name())
		}
	}
	list := fmt.Sprintf("run '%s --help' for its %d commands", cmd.CommandPath(), len(verbs))
	if len(verbs) <= 10 {
		list = "one of: " + strings.Join(verbs, ", ")
	}
	if len(args) == 0 {
		return usageError{fmt.Errorf("%s: missing command; %s", cmd.CommandPath(), list)}
	}
	if near := closest(args[0], verbs); len(near) > 0 {
		return usageError{fmt.Errorf("%s: unknown command %q; did you mean %s?", cmd.CommandPath(), args[0], strings.Join(near, " or "))}
	}
	return usageError{fmt.Errorf("%s: unknown command %q; %s", cmd.CommandPath(), args[0], list)}
}

// closest returns up to three names nearest to typed: by edit distance
// (at most a third of its length, and at least 2), or that it begins.
func closest(typed string, names []string) []string {
	type cand struct {
		name string
		d    int
	}
	limit := max(2, len(typed)/3)
	var cs []cand
	for _, n := range names {
		d := editDistance(strings.ToLower(typed), strings.ToLower(n))
		if d <= limit || (len(typed) >= 3 && strings.HasPrefix(n, typed)) {
			cs = append(cs, cand{n, d})
		}
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return a.d - b.d })
	var out []string
	for _, c := range cs[:min(3, len(cs))] {
		out = append(out, c.name)
	}
	return out
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// singleDashAnnotation names, on a command, the multi-letter flags it
// takes after one dash: "ttl=messageTTL,time=test-duration".
const singleDashAnnotation = "isobar/single-dash"

// singleDash lets c take multi-letter flags after a single dash, as
// pulsar-admin and pulsar-perf spell some of theirs (-ttl, -time, -st):
// pflag would read "-ttl" as -t -t -l. c parses its own flags, after
// rewriteSingleDash has turned each such flag into its long name (long
// maps "ttl" to "messageTTL").
func singleDash(c *cobra.Command, long map[string]string) *cobra.Command {
	var pairs []string
	for _, k := range slices.Sorted(maps.Keys(long)) {
		pairs = append(pairs, k+"="+long[k])
	}
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[singleDashAnnotation] = strings.Join(pairs, ",")
	c.DisableFlagParsing = true
	validate, run := c.Args, c.RunE
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, raw []string) error {
		pos, err := parseOwnFlags(cmd, raw)
		if err != nil {
			return err
		}
		if help, _ := cmd.Flags().GetBool("help"); help {
			return cmd.Help()
		}
		if validate != nil {
			if err := validate(cmd, pos); err != nil {
				return err
			}
		}
		return run(cmd, pos)
	}
	return c
}

// parseOwnFlags parses args as cmd's flags (its single-dash ones
// rewritten) and returns the positional arguments.
func parseOwnFlags(cmd *cobra.Command, args []string) ([]string, error) {
	disabled := cmd.DisableFlagParsing
	cmd.DisableFlagParsing = false
	defer func() { cmd.DisableFlagParsing = disabled }()
	if err := cmd.ParseFlags(rewriteSingleDash(cmd, args)); err != nil {
		return nil, cmd.FlagErrorFunc()(cmd, err)
	}
	return cmd.Flags().Args(), nil
}

// rewriteSingleDash turns cmd's single-dash multi-letter flags in args
// ("-ttl", "-ttl=1h") into their long names ("--messageTTL").
func rewriteSingleDash(cmd *cobra.Command, args []string) []string {
	long := map[string]string{}
	for _, kv := range strings.Split(cmd.Annotations[singleDashAnnotation], ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			long[k] = v
		}
	}
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if name, ok := strings.CutPrefix(a, "-"); ok && !strings.HasPrefix(name, "-") {
			n, val, hasVal := strings.Cut(name, "=")
			if l, ok := long[n]; ok {
				a = "--" + l
				if hasVal {
					a += "=" + val
				}
			}
		}
		out = append(out, a)
	}
	return out
}

// alias adds old as a hidden second name of fl's flag name (same value),
// so that an earlier spelling keeps working.
func alias(fl *pflag.FlagSet, name, old string) {
	f := fl.Lookup(name)
	fl.Var(f.Value, old, "same as --"+name)
	fl.Lookup(old).NoOptDefVal = f.NoOptDefVal
	fl.Lookup(old).Hidden = true
}

// flagAs names a flag in a message as the user gave it: the alias when
// that was used, else -s/--long.
func flagAs(cmd *cobra.Command, name string, aliases ...string) string {
	for _, a := range aliases {
		if cmd.Flags().Changed(a) {
			return "--" + a
		}
	}
	if f := cmd.Flags().Lookup(name); f != nil && f.Shorthand != "" {
		return "-" + f.Shorthand + "/--" + name
	}
	return "--" + name
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
