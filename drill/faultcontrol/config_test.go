package faultcontrol

import (
	"errors"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

const goodConfig = `
listen: 127.0.0.1:7700
latency: 40ms
hookTimeout: 1m
regions:
  - name: r0
    ready: http://10.0.0.1:8080/readyz
    kill: [systemctl, kill, --signal=SIGKILL, isobar-region]
    start: [systemctl, start, isobar-region]
    links:
      - {to: r1, listen: "0.0.0.0:7101", target: "10.0.1.1:6671"}
      - {to: global, listen: "0.0.0.0:7102", target: "10.0.9.1:2379"}
  - name: r1
    ready: https://r1.example:8443/readyz
    kill: [docker, kill, r1]
    start: [docker, start, r1]
    links:
      - {to: r0, listen: ":7201", target: "10.0.0.1:6571"}
  - name: r2
    ready: http://127.0.0.1:8180/readyz
    kill: [docker, kill, r2-broker]
    start: [docker, start, r2-broker]
    partition: [docker, network, disconnect, wan, r2-broker]
    heal: [docker, network, connect, --alias, broker, wan, r2-broker]
`

func TestParseGood(t *testing.T) {
	c, err := Parse([]byte(goodConfig))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Latency != 40*time.Millisecond || c.hookTimeout() != time.Minute || len(c.Regions) != 3 ||
		c.Regions[0].Kill[3] != "isobar-region" || c.Regions[0].Links[1].To != GlobalStore || c.Regions[1].Links[0].Listen != ":7201" ||
		c.Regions[2].Partition[2] != "disconnect" || len(c.Regions[2].Heal) != 7 {
		t.Fatalf("parsed %+v", c)
	}
	// The defaults of the zero values.
	min, err := Parse([]byte("regions: [{name: a, ready: 'http://h/readyz', kill: [k], start: [s]}]"))
	if err != nil || min.Validate() != nil || min.listenAddr() != DefaultListen || min.hookTimeout() != DefaultHookTimeout {
		t.Fatalf("%+v %v %v", min, err, min.Validate())
	}
}

// badConfigs are configurations Parse or Validate refuse, each with what
// the error must name.
var badConfigs = []struct{ yaml, want string }{
	{"", "regions: none"},
	{"nosuch: 1", "field nosuch not found"},
	{"regions: [{name: a, ready: 'http://h', kill: [k], start: [s], extra: 1}]", "field extra not found"},
	{"listen: x\n---\nlisten: y", "more than one YAML document"},
	{"regions: 3", "cannot unmarshal"},
	{"latency: soon", "`soon` into time.Duration"},
	{"latency: 11s\nregions: [{name: a, ready: 'http://h', kill: [k], start: [s]}]", "latency: 11s is not within"},
	{"hookTimeout: 10ms\nregions: [{name: a, ready: 'http://h', kill: [k], start: [s]}]", "hookTimeout: 10ms"},
	{"listen: nowhere\nregions: [{name: a, ready: 'http://h', kill: [k], start: [s]}]", `listen: "nowhere" is not host:port`},
	{"regions: [{name: A_1, ready: 'http://h', kill: [k], start: [s]}]", `regions[0].name: "A_1"`},
	{"regions: [{name: global, ready: 'http://h', kill: [k], start: [s]}]", `regions[0].name: "global" names the global store`},
	{"regions: [{name: a, ready: 'http://h', kill: [k], start: [s]}, {name: a, ready: 'http://h', kill: [k], start: [s]}]", `regions[1].name: "a" is given twice`},
	{"regions: [{name: a, kill: [k], start: [s]}]", "regions[0].ready: required"},
	{"regions: [{name: a, ready: 'h:80/readyz', kill: [k], start: [s]}]", "regions[0].ready: \"h:80/readyz\" is not an http"},
	{"regions: [{name: a, ready: 'http://h', start: [s]}]", "regions[0].kill: required"},
	{"regions: [{name: a, ready: 'http://h', kill: [k]}]", "regions[0].start: required"},
	{"regions: [{name: a, ready: 'http://h', kill: [''], start: [s]}]", "regions[0].kill: the program (first element) is empty"},
	{"regions: [{name: a, ready: 'http://h', kill: k, start: [s]}]", "cannot unmarshal"},
	{"regions: [{name: a, ready: 'http://h', kill: [k], start: [s], partition: [p]}]", "regions[0].heal: required with partition"},
	{"regions: [{name: a, ready: 'http://h', kill: [k], start: [s], heal: [h]}]", "regions[0].partition: required with heal"},
	{"regions: [{name: a, ready: 'http://h', kill: [k], start: [s], partition: [''], heal: [h]}]", "regions[0].partition: the program (first element) is empty"},
	{"regions: [{name: a, ready: 'http://h', kill: [k], start: [s], partition: [p], heal: ['', x]}]", "regions[0].heal: the program (first element) is empty"},
	{"regions: [{name: a, ready: 'http://h', kill: [k], start: [s], partition: p, heal: [h]}]", "cannot unmarshal"},
	{"regions: [{name: a, ready: 'http://h', kill: [k], start: [s], partition: [p], heal: [h], links: [{to: global, listen: ':1', target: 'h:2'}]}]", "regions[0].partition: a region's WAN is cut by its links or by partition and heal commands, not both"},
	{"regions: [{name: a, ready: 'http://h', kill: [k], start: [s], links: [{listen: ':1', target: 'h:2'}]}]", "regions[0].links[0].to: required"},
	{"regions: [{name: a, ready: 'http://h', kill: [k], start: [s], links: [{to: a, listen: ':1', target: 'h:2'}]}]", `links[0].to: "a" is the link's own region`},
	{"regions: [{name: a, ready: 'http://h', kill: [k], start: [s], links: [{to: b, listen: ':1', target: 'h:2'}]}]", `links[0].to: "b" is neither`},
	{"regions: [{name: a, ready: 'http://h', kill: [k], start: [s], links: [{to: global, target: 'h:2'}]}]", "links[0].listen: required"},
	{"regions: [{name: a, ready: 'http://h', kill: [k], start: [s], links: [{to: global, listen: ':0', target: 'h:2'}]}]", `links[0].listen: ":0": port "0"`},
	{"regions: [{name: a, ready: 'http://h', kill: [k], start: [s], links: [{to: global, listen: ':99999', target: 'h:2'}]}]", `port "99999"`},
	{"regions: [{name: a, ready: 'http://h', kill: [k], start: [s], links: [{to: global, listen: ':1'}]}]", "links[0].target: required"},
	{"regions: [{name: a, ready: 'http://h', kill: [k], start: [s], links: [{to: global, listen: ':1', target: ':2'}]}]", `links[0].target: ":2" has no host`},
	{"regions: [{name: a, ready: 'http://h', kill: [k], start: [s], links: [{to: global, listen: ':1', target: 'h:x'}]}]", `port "x"`},
	{"listen: 127.0.0.1:7\nregions: [{name: a, ready: 'http://h', kill: [k], start: [s], links: [{to: global, listen: '0.0.0.0:7', target: 'h:2'}]}]", `links[0].listen: "0.0.0.0:7" would listen where listen ("127.0.0.1:7") does`},
	{"regions: [{name: a, ready: 'http://h', kill: [k], start: [s], links: [{to: global, listen: '127.0.0.1:7', target: 'h:2'}, {to: global, listen: '127.0.0.1:7', target: 'h:3'}]}]", "links[1].listen"},
	{"regions: [{name: a, ready: 'http://h', kill: [k], start: [s], links: [{to: global, listen: '127.0.0.1:7', target: '127.0.0.1:7'}]}]", "would forward to itself"},
}

func TestParseRefusesBadConfigs(t *testing.T) {
	for _, c := range badConfigs {
		cfg, err := Parse([]byte(c.yaml))
		if err == nil {
			err = cfg.Validate()
		}
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want ErrConfig naming %q", c.yaml, err, c.want)
		}
	}
}

// TestValidateReportsEverything: one configuration with several problems
// gets them all in one error.
func TestValidateReportsEverything(t *testing.T) {
	c, err := Parse([]byte("latency: -1s\nregions: [{name: a, ready: 'ftp://h'}, {name: a}]"))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate()
	for _, want := range []string{"latency:", "regions[0].ready:", "regions[0].kill:", "regions[0].start:", "regions[1].name:", "regions[1].ready:", "regions[1].kill:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: does not name %s", err, want)
		}
	}
}

// FuzzParse: any input parses or is refused with ErrConfig, and a valid
// configuration marshals back to YAML that parses as the same.
func FuzzParse(f *testing.F) {
	f.Add([]byte(goodConfig))
	for _, c := range badConfigs {
		f.Add([]byte(c.yaml))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := Parse(raw)
		if err == nil {
			err = c.Validate()
		}
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("%q: %v, not ErrConfig", raw, err)
			}
			return
		}
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(out)
		if err != nil || again.Validate() != nil {
			t.Fatalf("%q: valid, but its YAML %q is not: %v", raw, out, err)
		}
		if a, b := mustYAML(t, c), mustYAML(t, again); a != b {
			t.Fatalf("%q: parsed as %s, again as %s", raw, a, b)
		}
	})
}

func mustYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
