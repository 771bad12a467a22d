package faultcontrol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is what `isobar fault-control` serves (docs/drills.md has an
// example): for each region, the commands that kill and start it, the
// URL that says whether it is up, and either the WAN links that carry its
// traffic to the other regions and to the global configuration store or
// the commands that cut it off from them and heal it. It
// holds plain settings only; Parse reads it from YAML and Validate checks
// it, neither doing any I/O.
type Config struct {
	// Listen is the fault-control API's address; empty means
	// DefaultListen.
	Listen string `yaml:"listen"`
	// Latency is the one-way delay every link adds, in each direction
	// (0: none; at most 10s).
	Latency time.Duration `yaml:"latency"`
	// HookTimeout bounds a kill or a start: the hook command and then
	// the wait until the region's readiness URL says it is down (after a
	// kill) or up (after a start); and a partition or heal hook. Zero
	// means DefaultHookTimeout.
	HookTimeout time.Duration `yaml:"hookTimeout"`
	// Regions are the regions the API acts on, in the order GET /regions
	// lists them. At least one.
	Regions []RegionConfig `yaml:"regions"`
}

// RegionConfig is one region of Config.
type RegionConfig struct {
	// Name is the region's name, as the drill's endpoints and the
	// namespace's clusters call it. Required.
	Name string `yaml:"name"`
	// Ready is the region's readiness URL (a broker's /readyz): the
	// region is up while it answers 2xx within a second. Required.
	Ready string `yaml:"ready"`
	// Kill is the command (program and arguments, run without a shell)
	// that stops every process of the region as a crash would, for
	// example [systemctl, kill, --signal=SIGKILL, isobar-region].
	// Required.
	Kill []string `yaml:"kill"`
	// Start is the command that starts the killed region again on its
	// data, for example [systemctl, start, isobar-region]. Required.
	Start []string `yaml:"start"`
	// Links are the WAN links this region dials through: each listens
	// on Listen and forwards to Target, the other end's real address.
	// Partition, blackhole and heal act on every link of the region and
	// on every other region's link whose To is this region. A region has
	// links or Partition and Heal, not both.
	Links []LinkConfig `yaml:"links"`
	// Partition is the command that cuts the region off from the other
	// regions and the global store while its own clients still reach it,
	// for example [docker, network, disconnect, wan, broker-1]; Heal
	// undoes it. Both or neither. With them, partition and heal run them
	// (other regions' links to this region are left alone) and blackhole
	// is refused: a command cannot leave connections open and silent.
	Partition []string `yaml:"partition"`
	Heal      []string `yaml:"heal"`
}

// LinkConfig is one proxied link of a region.
type LinkConfig struct {
	// To is what the link leads to: another region of the file, or
	// GlobalStore. Required.
	To string `yaml:"to"`
	// Listen is where the link accepts connections (host:port; an empty
	// host listens on every interface). The region is configured to dial
	// this address instead of Target. Required, not port 0.
	Listen string `yaml:"listen"`
	// Target is the address the link forwards to (host:port). Required.
	Target string `yaml:"target"`
}

// Defaults of Config's zero values.
const (
	DefaultListen      = "127.0.0.1:6662"
	DefaultHookTimeout = 90 * time.Second
)

// GlobalStore is the To of a link to the global configuration store.
const GlobalStore = "global"

// MaxLatency bounds Config.Latency.
const MaxLatency = 10 * time.Second

// ErrConfig wraps every error of Parse and Validate.
var ErrConfig = errors.New("faultcontrol: bad configuration")

// Parse reads a Config from YAML: one document, unknown keys refused.
// It does not validate (flags may still override fields): call Validate.
func Parse(raw []byte) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("%w: more than one YAML document", ErrConfig)
	}
	return c, nil
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Validate reports every problem of c at once, each naming its field.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	// Every address something listens on, to find two on one port.
	type listener struct{ field, addr, host, port string }
	var listens []listener
	listen := func(field, addr string, zeroOK bool) {
		host, port, err := checkAddr(addr, zeroOK)
		if err != nil {
			bad(field, "%v", err)
			return
		}
		for _, l := range listens {
			if l.port == port && (l.host == host || wildcard(l.host) || wildcard(host)) {
				bad(field, "%q would listen where %s (%q) does", addr, l.field, l.addr)
				return
			}
		}
		if port != "0" {
			listens = append(listens, listener{field, addr, host, port})
		}
	}
	listen("listen", c.listenAddr(), true)
	if c.Latency < 0 || c.Latency > MaxLatency {
		bad("latency", "%v is not within 0..%v", c.Latency, MaxLatency)
	}
	if c.HookTimeout != 0 && (c.HookTimeout < time.Second || c.HookTimeout > time.Hour) {
		bad("hookTimeout", "%v is not 0 (default %v) or within 1s..1h", c.HookTimeout, DefaultHookTimeout)
	}
	if len(c.Regions) == 0 {
		bad("regions", "none: list at least one region (name, ready, kill, start, links)")
	}
	names := map[string]bool{}
	for _, r := range c.Regions {
		names[r.Name] = true
	}
	seen := map[string]bool{}
	for i, r := range c.Regions {
		f := fmt.Sprintf("regions[%d]", i)
		switch {
		case !nameRE.MatchString(r.Name):
			bad(f+".name", "%q must be 1-63 lower-case letters, digits or dashes, not starting or ending with a dash", r.Name)
		case r.Name == GlobalStore:
			bad(f+".name", "%q names the global store in links; a region cannot be called that", r.Name)
		case seen[r.Name]:
			bad(f+".name", "%q is given twice", r.Name)
		}
		seen[r.Name] = true
		if r.Ready == "" {
			bad(f+".ready", "required: the region's readiness URL, e.g. http://host:8080/readyz")
		} else if u, err := url.Parse(r.Ready); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(f+".ready", "%q is not an http:// or https:// URL", r.Ready)
		}
		// kill and start are required; partition and heal, each with
		// the other.
		for _, h := range []struct {
			field string
			argv  []string
			need  string // why it is required ("" if it is not)
		}{
			{"kill", r.Kill, "required"},
			{"start", r.Start, "required"},
			{"partition", r.Partition, need(len(r.Heal) > 0, "required with heal")},
			{"heal", r.Heal, need(len(r.Partition) > 0, "required with partition")},
		} {
			switch {
			case len(h.argv) == 0 && h.need != "":
				bad(f+"."+h.field, "%s: the command that does it, as a list (program, arguments), e.g. %s", h.need, hookExample[h.field])
			case len(h.argv) > 0 && h.argv[0] == "":
				bad(f+"."+h.field, "the program (first element) is empty")
			}
		}
		if len(r.Partition) > 0 && len(r.Links) > 0 {
			bad(f+".partition", "a region's WAN is cut by its links or by partition and heal commands, not both")
		}
		for j, l := range r.Links {
			lf := fmt.Sprintf("%s.links[%d]", f, j)
			switch {
			case l.To == "":
				bad(lf+".to", "required: another region of this file or %q", GlobalStore)
			case l.To == r.Name:
				bad(lf+".to", "%q is the link's own region", l.To)
			case l.To != GlobalStore && !names[l.To]:
				bad(lf+".to", "%q is neither a region of this file nor %q", l.To, GlobalStore)
			}
			if l.Listen == "" {
				bad(lf+".listen", "required: the address the region dials instead of the target")
			} else {
				listen(lf+".listen", l.Listen, false)
			}
			if l.Target == "" {
				bad(lf+".target", "required: the address the link forwards to")
			} else if host, _, err := checkAddr(l.Target, false); err != nil {
				bad(lf+".target", "%v", err)
			} else if host == "" {
				bad(lf+".target", "%q has no host", l.Target)
			}
		}
	}
	// A link whose target is a link's own address would loop.
	for i, r := range c.Regions {
		for j, l := range r.Links {
			for _, other := range listens {
				if host, port, err := net.SplitHostPort(l.Target); err == nil && port == other.port && host == other.host {
					bad(fmt.Sprintf("regions[%d].links[%d].target", i, j), "%q is %s: the link would forward to itself or the API", l.Target, other.field)
				}
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
}

var hookExample = map[string]string{
	"kill":      "[systemctl, kill, --signal=SIGKILL, isobar-region]",
	"start":     "[systemctl, start, isobar-region]",
	"partition": "[docker, network, disconnect, wan, broker-1]",
	"heal":      "[docker, network, connect, wan, broker-1]",
}

// need is why when cond holds, else "".
func need(cond bool, why string) string {
	if cond {
		return why
	}
	return ""
}

// checkAddr splits a host:port whose port is a number (0 only when
// zeroOK).
func checkAddr(addr string, zeroOK bool) (host, port string, err error) {
	host, port, err = net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("%q is not host:port", addr)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 || n == 0 && !zeroOK || strconv.Itoa(n) != port {
		return "", "", fmt.Errorf("%q: port %q is not a number within 1..65535", addr, port)
	}
	return host, port, nil
}

// wildcard reports whether host listens on every interface.
func wildcard(host string) bool { return host == "" || host == "0.0.0.0" || host == "::" }

// hookTimeout is c.HookTimeout or its default.
func (c Config) hookTimeout() time.Duration {
	if c.HookTimeout == 0 {
		return DefaultHookTimeout
	}
	return c.HookTimeout
}

// listenAddr is c.Listen or its default.
func (c Config) listenAddr() string {
	if c.Listen == "" {
		return DefaultListen
	}
	return c.Listen
}
