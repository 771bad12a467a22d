package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestDocumentedCommandsParse resolves every isobar command that
// README.md and docs/*.md show, in fenced code blocks and in inline code,
// against the command tree without running it: each verb must exist and
// each flag must be one of its command's. Placeholders (<topic>, $VAR,
// …) stand for anything.
func TestDocumentedCommandsParse(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	seen := 0
	for _, file := range files {
		for _, c := range documentedCommands(t, file) {
			seen++
			if err := resolveDocumented(newRootCmd(), c.args); err != nil {
				t.Errorf("%s:%d: %s\n\t%v", filepath.Base(file), c.line, c.text, err)
			}
		}
	}
	t.Logf("%d documented commands resolved", seen)
	if seen < 50 {
		t.Fatalf("found only %d commands in the docs: the scanner is broken", seen)
	}
}

type documentedCommand struct {
	line int
	text string
	args []string // after "isobar"
}

var inlineCode = regexp.MustCompile("`([^`]+)`")

// documentedCommands finds the isobar commands of a markdown file: the
// lines of fenced code blocks (joined at a trailing backslash) and inline
// code spans that start a command with isobar (or go run ./cmd/isobar).
func documentedCommands(t *testing.T, path string) []documentedCommand {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []documentedCommand
	add := func(line int, text string) {
		for _, seg := range shellCommands(text) {
			if args, ok := isobarArgs(seg); ok {
				out = append(out, documentedCommand{line, strings.TrimSpace(text), args})
			}
		}
	}
	sc := bufio.NewScanner(f)
	fenced := false
	var pending string
	pendingLine := 0
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			for _, m := range inlineCode.FindAllStringSubmatch(line, -1) {
				add(n, m[1])
			}
			continue
		}
		if pending == "" {
			pendingLine = n
		}
		if s, ok := strings.CutSuffix(strings.TrimRight(line, " "), `\`); ok {
			pending += s + " "
			continue
		}
		add(pendingLine, pending+line)
		pending = ""
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// shellCommands splits a line into its simple commands (at |, &&, ||,
// ;, a comment), each as words; redirections and what follows are dropped.
func shellCommands(line string) [][]string {
	var cmds [][]string
	var words []string
	var word strings.Builder
	inWord, quote := false, rune(0)
	flush := func() {
		if inWord {
			words = append(words, word.String())
		}
		word.Reset()
		inWord = false
	}
	end := func() {
		flush()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				word.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			flush()
		case r == '#' && !inWord:
			end()
			return cmds
		case r == '|' || r == ';' || r == '&' || r == '>' || r == '<' && (i+1 == len(rs) || !isPlaceholderStart(rs[i+1:])):
			end()
			if r == '>' || r == '<' { // a redirection: skip its target
				for i+1 < len(rs) && (rs[i+1] == ' ' || rs[i+1] == '>' || rs[i+1] == '&') {
					i++
				}
				for i+1 < len(rs) && rs[i+1] != ' ' {
					i++
				}
			}
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	end()
	return cmds
}

// isPlaceholderStart says whether rs (after a '<') is a placeholder like
// <topic> rather than a redirection.
func isPlaceholderStart(rs []rune) bool {
	for _, r := range rs {
		switch {
		case r == '>':
			return true
		case r == ' ' && false, r == '<':
			return false
		}
	}
	return false
}

// isobarArgs returns the arguments of an isobar command (after
// environment assignments, "$ " prompts, sudo and timeout).
func isobarArgs(words []string) ([]string, bool) {
	for len(words) > 0 {
		w := words[0]
		switch {
		case w == "$" || w == "sudo" || w == "exec":
			words = words[1:]
		case strings.Contains(w, "=") && !strings.HasPrefix(w, "-"):
			words = words[1:] // VAR=value
		default:
			goto cmd
		}
	}
cmd:
	switch {
	case len(words) >= 3 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/isobar":
		return words[3:], true
	case len(words) >= 1 && (words[0] == "isobar" || strings.HasSuffix(words[0], "/isobar") && !strings.HasPrefix(words[0], "./cmd")):
		return words[1:], true
	}
	return nil, false
}

// isPlaceholder says whether a documented word stands for a value.
func isPlaceholder(w string) bool {
	return strings.ContainsAny(w, "<>$…{}") || strings.Contains(w, "...") || w == "[flags]"
}

// resolveDocumented finds the command args name and checks its flags,
// as cobra would, without running it.
func resolveDocumented(root *cobra.Command, args []string) error {
	var clean []string
	for _, a := range args {
		a = strings.TrimSuffix(strings.TrimPrefix(a, "["), "]")
		if a == "" || a == "|" {
			continue
		}
		clean = append(clean, a)
	}
	cmd, rest, err := root.Find(clean)
	if err != nil {
		return err
	}
	if cmd.HasSubCommands() {
		takesValue := false // the word before is a flag that takes one
		for _, a := range rest {
			if !strings.HasPrefix(a, "-") {
				if isPlaceholder(a) || takesValue {
					break
				}
				return fmt.Errorf("%s has no command %q", cmd.CommandPath(), a)
			}
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			f := cmd.Flags().Lookup(name)
			if f == nil {
				f = cmd.InheritedFlags().Lookup(name)
			}
			takesValue = f != nil && !hasValue && f.NoOptDefVal == ""
		}
	}
	long := map[string]bool{}
	for _, kv := range strings.Split(cmd.Annotations[singleDashAnnotation], ",") {
		if k, _, ok := strings.Cut(kv, "="); ok {
			long[k] = true
		}
	}
	lookup := func(name string) bool {
		return cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil || name == "help"
	}
	short := func(c byte) *cobraFlag {
		if f := cmd.Flags().ShorthandLookup(string(c)); f != nil {
			return &cobraFlag{f.Value.Type() == "bool"}
		}
		if f := cmd.InheritedFlags().ShorthandLookup(string(c)); f != nil {
			return &cobraFlag{f.Value.Type() == "bool"}
		}
		if c == 'h' {
			return &cobraFlag{true}
		}
		return nil
	}
	var bad []string
	for _, a := range rest {
		if a == "--" {
			break
		}
		switch {
		case strings.HasPrefix(a, "--"):
			name, _, _ := strings.Cut(a[2:], "=")
			if !lookup(name) && !isPlaceholder(name) {
				bad = append(bad, a)
			}
		case strings.HasPrefix(a, "-") && len(a) > 1 && !isNumber(a):
			name, _, _ := strings.Cut(a[1:], "=")
			if long[name] {
				continue
			}
			for i := 0; i < len(name); i++ {
				f := short(name[i])
				if f == nil {
					bad = append(bad, a)
					break
				}
				if !f.isBool {
					break // the rest is its value
				}
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s has no flag %s", cmd.CommandPath(), strings.Join(bad, ", "))
	}
	return nil
}

type cobraFlag struct{ isBool bool }

func isNumber(s string) bool {
	_, err := fmt.Sscanf(s, "%g", new(float64))
	return err == nil
}

// TestResolveDocumented checks the checker: what it accepts and refuses.
func TestResolveDocumented(t *testing.T) {
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{"isobar admin namespaces set-retention <tenant/namespace> -t 7d -s 10G", true},
		{"isobar admin namespaces set-message-ttl $NS -ttl 1h", true},
		{"go run ./cmd/isobar dev --regions a,b", true},
		{"ISOBAR_SERVICE_URL=pulsar://h:6650 isobar perf produce t -r 1000 -time 30 | tail -1", true},
		{"isobar bookie --config bookie.yaml", true},
		{"isobar admin topics examine-message <topic> [-i earliest] [-m 2]", true},
		{"isobar admin namespaces set-retension t/ns", false},
		{"isobar admin namespaces set-retention t/ns --forever", false},
		{"isobar admin namespaces set-retention t/ns -x 1", false},
		{"isobar perf produce t -time 30 -zz", false},
		{"isobar frobnicate", false},
	} {
		cmds := shellCommands(tc.line)
		args, found := isobarArgs(cmds[0])
		if !found {
			t.Errorf("%q: not an isobar command", tc.line)
			continue
		}
		if err := resolveDocumented(newRootCmd(), args); (err == nil) != tc.ok {
			t.Errorf("%q: %v, want ok %t", tc.line, err, tc.ok)
		}
	}
}

var (
	markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	anyURL       = regexp.MustCompile(`[a-z][a-z0-9+]*://[^\s)"'` + "`" + `]+`)
)

// TestReadmeStaysInRepo checks that README.md opens with the commands it
// promises and points only inside the repository: every link is a path
// that exists, every URL is a loopback one.
func TestReadmeStaysInRepo(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	for _, want := range []string{"go run ./cmd/isobar dev", "go test ./...", "scripts/install-deps.sh", "go build -o isobar ./cmd/isobar", "ISOBAR_SERVICE_URL", "ISOBAR_ADMIN_URL"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md does not say %q", want)
		}
	}
	if i, j := strings.Index(readme, "go build -o isobar"), strings.Index(readme, "## What runs today"); i < 0 || j < 0 || i > j {
		t.Errorf("README.md: the build step (at %d) must come before the inventory (at %d)", i, j)
	}
	for _, m := range markdownLink.FindAllStringSubmatch(readme, -1) {
		target, _, _ := strings.Cut(m[1], "#")
		if target == "" {
			continue
		}
		if strings.Contains(target, "://") || strings.HasPrefix(target, "/") || strings.HasPrefix(target, "..") {
			t.Errorf("README.md links outside the repository: %s", m[1])
			continue
		}
		if _, err := os.Stat(filepath.Join("../..", target)); err != nil {
			t.Errorf("README.md links to %s: %v", m[1], err)
		}
	}
	for _, u := range anyURL.FindAllString(readme, -1) {
		host := u[strings.Index(u, "://")+3:]
		if !strings.HasPrefix(host, "127.0.0.1") && !strings.HasPrefix(host, "localhost") && !strings.HasPrefix(host, "<") {
			// multi-host URLs of example deployments name hosts, not sites
			if strings.Contains(u, "://") && strings.ContainsAny(host, ".") && !isExampleHost(host) {
				t.Errorf("README.md points outside the repository: %s", u)
			}
		}
	}
}

// isExampleHost says whether host is one of the README's example
// deployment's (private addresses, internal names), not a web site.
func isExampleHost(host string) bool {
	h, _, _ := strings.Cut(host, "/")
	h, _, _ = strings.Cut(h, ":")
	return strings.HasPrefix(h, "10.") || strings.HasSuffix(h, ".internal") || !strings.Contains(h, ".") ||
		strings.HasPrefix(h, "nats.") || strings.HasPrefix(h, "bookie-")
}
