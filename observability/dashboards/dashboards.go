// Package dashboards owns Isobar's Grafana dashboards (the *.json files
// beside it, docs/observability.md): it embeds them and lists every
// PromQL expression their panels run, with the metric names each one
// reads, so tests can check the dashboards against what the servers
// export.
package dashboards

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

//go:embed *.json
var files embed.FS

// FS holds the dashboard JSON files, one per dashboard.
func FS() fs.FS { return files }

// Query is one PromQL expression of a dashboard panel.
type Query struct {
	Dashboard string // file name, e.g. "broker.json"
	Panel     string // panel title
	Expr      string // PromQL, with Grafana variables ($region, $__rate_interval) as written
}

// Panel is a dashboard panel and its queries (rows included, which have
// none).
type Panel struct {
	Dashboard, Title, Type string
	Exprs                  []string
}

type panelJSON struct {
	Type    string      `json:"type"`
	Title   string      `json:"title"`
	Panels  []panelJSON `json:"panels"` // a collapsed row's panels
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// Panels parses every dashboard and returns its panels in file order,
// the panels of collapsed rows included.
func Panels() ([]Panel, error) {
	names, err := fs.Glob(files, "*.json")
	if err != nil {
		return nil, err
	}
	var out []Panel
	for _, name := range names {
		data, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		var d struct {
			Panels []panelJSON `json:"panels"`
		}
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, fmt.Errorf("dashboards: %s: %w", name, err)
		}
		var walk func([]panelJSON)
		walk = func(ps []panelJSON) {
			for _, p := range ps {
				q := Panel{Dashboard: path.Base(name), Title: p.Title, Type: p.Type}
				for _, t := range p.Targets {
					if e := strings.TrimSpace(t.Expr); e != "" {
						q.Exprs = append(q.Exprs, e)
					}
				}
				out = append(out, q)
				walk(p.Panels)
			}
		}
		walk(d.Panels)
	}
	return out, nil
}

// Queries returns every PromQL expression of every dashboard panel.
func Queries() ([]Query, error) {
	ps, err := Panels()
	if err != nil {
		return nil, err
	}
	var out []Query
	for _, p := range ps {
		for _, e := range p.Exprs {
			out = append(out, Query{Dashboard: p.Dashboard, Panel: p.Title, Expr: e})
		}
	}
	return out, nil
}

// MetricNames returns, sorted and without duplicates, the names of the
// series expr selects, exactly as they appear in the Prometheus text
// format: a histogram read through foo_bucket, foo_sum or foo_count
// yields those names, not foo. It is a small tokenizer, not a parser:
// an identifier is a metric name unless it is followed by "(" (a
// function), is a PromQL keyword or aggregation operator, or is a label
// name (inside {...} or the list after by, without, on, ignoring,
// group_left, group_right). Strings, durations in [...], numbers and
// Grafana variables ($x, ${x}) are skipped; {__name__="x"} names x.
func MetricNames(expr string) []string {
	var names []string
	s := expr
	i := 0
	skipSpace := func(j int) int {
		for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r') {
			j++
		}
		return j
	}
	// labelList skips a parenthesised label list at j (after by etc.).
	labelList := func(j int) int {
		j = skipSpace(j)
		if j < len(s) && s[j] == '(' {
			if k := strings.IndexByte(s[j:], ')'); k >= 0 {
				return j + k + 1
			}
			return len(s)
		}
		return j
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == '#': // comment to end of line
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			i = skipString(s, i)
		case c == '[': // range or subquery duration, may hold $__rate_interval
			if k := strings.IndexByte(s[i:], ']'); k >= 0 {
				i += k + 1
			} else {
				i = len(s)
			}
		case c == '{':
			end, name := selector(s, i)
			if name != "" {
				names = append(names, name)
			}
			i = end
		case c == '$': // Grafana variable: $name or ${name...}
			i++
			if i < len(s) && s[i] == '{' {
				if k := strings.IndexByte(s[i:], '}'); k >= 0 {
					i += k + 1
				} else {
					i = len(s)
				}
				break
			}
			for i < len(s) && isIdent(s[i], false) {
				i++
			}
		case isDigit(c) || (c == '.' && i+1 < len(s) && isDigit(s[i+1])):
			// A number or a duration (5m, 1e3, 0x1f, 1h30m): digits,
			// letters, dots and an exponent's sign.
			hex := strings.HasPrefix(strings.ToLower(s[i:]), "0x")
			for i < len(s) && (isIdent(s[i], false) || s[i] == '.' ||
				(!hex && (s[i] == '+' || s[i] == '-') && (s[i-1] == 'e' || s[i-1] == 'E'))) {
				i++
			}
		case isIdent(c, true):
			j := i
			for j < len(s) && isIdent(s[j], false) {
				j++
			}
			word := s[i:j]
			next := skipSpace(j)
			lw := strings.ToLower(word)
			switch {
			case labelListKeywords[lw]:
				j = labelList(j)
			case keywords[lw], aggregations[lw]:
			case next < len(s) && s[next] == '(':
				// a function call
			default:
				names = append(names, word)
			}
			i = j
		default:
			i++
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// selector skips the label matchers starting at s[i] == '{' and returns
// the index after the closing brace and the value of a __name__ matcher
// with = (empty if none).
func selector(s string, i int) (int, string) {
	name := ""
	i++
	for i < len(s) && s[i] != '}' {
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(s, i)
		case isIdent(c, true):
			j := i
			for j < len(s) && isIdent(s[j], false) {
				j++
			}
			label := s[i:j]
			k := j
			for k < len(s) && s[k] == ' ' {
				k++
			}
			if label == "__name__" && k+1 < len(s) && s[k] == '=' && s[k+1] != '~' {
				k++
				for k < len(s) && s[k] == ' ' {
					k++
				}
				if k < len(s) && (s[k] == '"' || s[k] == '\'' || s[k] == '`') {
					end := skipString(s, k)
					name = strings.Trim(s[k:end], "\"'`")
					j = end
				}
			}
			i = j
		default:
			i++
		}
	}
	if i < len(s) {
		i++
	}
	return i, name
}

// skipString returns the index after the string literal starting at s[i].
func skipString(s string, i int) int {
	q := s[i]
	i++
	for i < len(s) && s[i] != q {
		if s[i] == '\\' && q != '`' {
			i++
		}
		i++
	}
	return min(i+1, len(s))
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isIdent(c byte, first bool) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && isDigit(c))
}

// keywords are PromQL words that are not metric names wherever they
// stand: binary operators, modifiers and literals.
var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true,
	"offset": true, "start": true, "end": true, "inf": true, "nan": true,
}

// labelListKeywords are followed by a parenthesised list of label names.
var labelListKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true,
}

// aggregations are PromQL's aggregation operators, which may be followed
// by by/without before their parenthesis.
var aggregations = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true,
	"stddev": true, "stdvar": true, "count": true, "count_values": true,
	"bottomk": true, "topk": true, "quantile": true, "limitk": true,
	"limit_ratio": true,
}
