package proctest

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Layout describes a federation of processes: a global store of Global
// members and, per region, Metastores etcd members, Bookies bookies,
// Brokers brokers, one NATS server and Replicators workers.
type Layout struct {
	Regions     []string
	Global      int
	Metastores  int
	Bookies     int
	Brokers     int
	Replicators int
	// BrokerLeaseTTL is how long a killed broker keeps its bundles
	// (zero: the broker's default).
	BrokerLeaseTTL time.Duration
	// BookieRegistrationTTL is how long a killed bookie stays registered
	// (zero: the bookie's default).
	BookieRegistrationTTL time.Duration
	// BrokerConfig holds more settings of every broker's `broker`
	// section (by YAML key), for brokers started with the layout and by
	// AddBroker.
	BrokerConfig map[string]any
}

// Fed is a running federation of processes.
type Fed struct {
	t       testing.TB
	bin     string
	dir     string
	layout  Layout
	Global  *Cluster
	Regions []*Region
}

// Cluster is an etcd cluster of `isobar metastore` processes.
type Cluster struct {
	Members   []*Proc
	Endpoints []string
}

// Region is one region's processes.
type Region struct {
	Name        string
	Meta        *Cluster
	Bookies     []*Proc
	Brokers     []*Proc
	NATS        *Proc
	Replicators []*Proc
	// ServiceURLs and HTTPURLs are the brokers', in order.
	ServiceURLs, HTTPURLs []string
	NATSURL               string
	gatewayPort           int
}

// ServiceURL is a multi-host Pulsar URL of every broker of the region.
func (r *Region) ServiceURL() string {
	var hosts []string
	for _, u := range r.ServiceURLs {
		hosts = append(hosts, strings.TrimPrefix(u, "pulsar://"))
	}
	return "pulsar://" + strings.Join(hosts, ",")
}

// All lists every process of the region.
func (r *Region) All() []*Proc {
	out := append([]*Proc{}, r.Meta.Members...)
	out = append(out, r.NATS)
	out = append(out, r.Bookies...)
	out = append(out, r.Brokers...)
	return append(out, r.Replicators...)
}

// StartFederation starts l's processes from the built binary under dir:
// the global store, then per region its etcd cluster, NATS, bookies,
// brokers and replicators, each waited for on its /readyz.
func StartFederation(t testing.TB, l Layout, dir string) *Fed {
	t.Helper()
	f := &Fed{t: t, bin: Binary(t), dir: dir, layout: l}
	start := time.Now()
	f.Global = f.cluster("global", l.Global)
	for _, name := range l.Regions {
		r := &Region{Name: name, gatewayPort: FreePort(t)}
		f.Regions = append(f.Regions, r)
	}
	for _, r := range f.Regions {
		r.Meta = f.cluster(r.Name+"-meta", l.Metastores)
	}
	waitAll(t, append(f.Global.Members, f.allMeta()...), 90*time.Second)
	for _, r := range f.Regions {
		f.addNATS(r)
		for i := range l.Bookies {
			f.addBookie(r, i, l.BookieRegistrationTTL)
		}
	}
	var ps []*Proc
	for _, r := range f.Regions {
		ps = append(ps, r.NATS)
		ps = append(ps, r.Bookies...)
	}
	waitAll(t, ps, 60*time.Second)
	ps = nil
	for _, r := range f.Regions {
		for i := range l.Brokers {
			f.addBroker(r, i)
		}
		ps = append(ps, r.Brokers...)
	}
	waitAll(t, ps, 60*time.Second)
	ps = nil
	for _, r := range f.Regions {
		for i := range l.Replicators {
			f.addReplicator(r, i)
		}
		ps = append(ps, r.Replicators...)
	}
	waitAll(t, ps, 60*time.Second)
	t.Logf("federation of %d processes started in %v", f.count(), time.Since(start).Round(time.Millisecond))
	return f
}

func (f *Fed) count() int {
	n := len(f.Global.Members)
	for _, r := range f.Regions {
		n += len(r.All())
	}
	return n
}

func (f *Fed) allMeta() []*Proc {
	var out []*Proc
	for _, r := range f.Regions {
		out = append(out, r.Meta.Members...)
	}
	return out
}

// waitAll waits for every process to be ready.
func waitAll(t testing.TB, ps []*Proc, timeout time.Duration) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(ps))
	for i, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = p.AwaitReady(timeout) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// cluster starts an etcd cluster of n `isobar metastore` members.
func (f *Fed) cluster(name string, n int) *Cluster {
	c := &Cluster{}
	type member struct{ name, client, peer string }
	var ms []member
	var initial []string
	for i := range n {
		m := member{fmt.Sprintf("%s-%d", name, i), Addr(FreePort(f.t)), Addr(FreePort(f.t))}
		ms = append(ms, m)
		initial = append(initial, m.name+"=http://"+m.peer)
		c.Endpoints = append(c.Endpoints, "http://"+m.client)
	}
	for _, m := range ms {
		http := Addr(FreePort(f.t))
		p := New(f.t, f.bin, f.dir, m.name, map[string]any{
			"etcd": map[string]any{
				"name": m.name, "dataDir": filepath.Join(f.dir, m.name, "data"),
				"clientAddr": m.client, "peerAddr": m.peer,
				"initialCluster": strings.Join(initial, ","), "clusterToken": name,
				"httpAddr": http,
			},
		}, "metastore")
		p.ReadyURL = "http://" + http + "/readyz"
		p.Start()
		c.Members = append(c.Members, p)
	}
	return c
}

func (f *Fed) addNATS(r *Region) {
	port, http := FreePort(f.t), Addr(FreePort(f.t))
	gws := map[string]any{}
	for _, o := range f.Regions {
		if o != r {
			gws[o.Name] = fmt.Sprintf("nats://127.0.0.1:%d", o.gatewayPort)
		}
	}
	p := New(f.t, f.bin, f.dir, r.Name+"-nats", map[string]any{
		"nats": map[string]any{
			"region": r.Name, "host": "127.0.0.1", "port": port, "gatewayPort": r.gatewayPort,
			"gateways": gws, "httpAddr": http,
		},
	}, "nats")
	p.ReadyURL = "http://" + http + "/readyz"
	p.Start()
	r.NATS, r.NATSURL = p, fmt.Sprintf("nats://127.0.0.1:%d", port)
}

// addBookie starts bookie i of r; its id is its process name.
func (f *Fed) addBookie(r *Region, i int, ttl time.Duration) {
	name := fmt.Sprintf("%s-bookie-%d", r.Name, i)
	http := Addr(FreePort(f.t))
	b := map[string]any{
		"id": name, "region": r.Name, "listenAddr": Addr(FreePort(f.t)), "rack": fmt.Sprintf("rack-%d", i),
		"journalDir": filepath.Join(f.dir, name, "journal"), "ledgerDir": filepath.Join(f.dir, name, "ledgers"),
		"httpAddr": http,
	}
	if ttl > 0 {
		b["registrationTTL"] = ttl.String()
	}
	p := New(f.t, f.bin, f.dir, name, map[string]any{
		"metastore": map[string]any{"endpoints": r.Meta.Endpoints},
		"bookie":    b,
	}, "bookie")
	p.ReadyURL = "http://" + http + "/readyz"
	p.Start()
	r.Bookies = append(r.Bookies, p)
}

// AddBroker starts one more broker in r, as the layout's, and waits
// until it is ready.
func (f *Fed) AddBroker(r *Region) *Proc {
	f.t.Helper()
	f.addBroker(r, len(r.Brokers))
	p := r.Brokers[len(r.Brokers)-1]
	waitAll(f.t, []*Proc{p}, 60*time.Second)
	return p
}

func (f *Fed) addBroker(r *Region, i int) {
	name := fmt.Sprintf("%s-broker-%d", r.Name, i)
	listen, http := Addr(FreePort(f.t)), Addr(FreePort(f.t))
	b := map[string]any{
		"region": r.Name, "name": name, "listenAddr": listen, "httpListenAddr": http,
		"dataDir": filepath.Join(f.dir, name, "data"),
	}
	if ttl := f.layout.BrokerLeaseTTL; ttl > 0 {
		b["leaseTTL"] = ttl.String()
	}
	for k, v := range f.layout.BrokerConfig {
		b[k] = v
	}
	p := New(f.t, f.bin, f.dir, name, map[string]any{
		"metastore": map[string]any{"endpoints": r.Meta.Endpoints},
		"global":    map[string]any{"endpoints": f.Global.Endpoints},
		"broker":    b,
	}, "broker")
	p.ReadyURL = "http://" + http + "/readyz"
	p.Start()
	r.Brokers = append(r.Brokers, p)
	r.ServiceURLs = append(r.ServiceURLs, "pulsar://"+listen)
	r.HTTPURLs = append(r.HTTPURLs, "http://"+http)
}

func (f *Fed) addReplicator(r *Region, i int) {
	name := fmt.Sprintf("%s-replicator-%d", r.Name, i)
	http := Addr(FreePort(f.t))
	p := New(f.t, f.bin, f.dir, name, map[string]any{
		"metastore": map[string]any{"endpoints": r.Meta.Endpoints},
		"global":    map[string]any{"endpoints": f.Global.Endpoints},
		"replicator": map[string]any{
			"region": r.Name, "id": name, "serviceUrl": r.ServiceURL(), "natsUrl": r.NATSURL,
			"dataDir": filepath.Join(f.dir, name, "data"), "httpAddr": http, "scanInterval": "500ms",
		},
	}, "replicator")
	p.ReadyURL = "http://" + http + "/readyz"
	p.Start()
	r.Replicators = append(r.Replicators, p)
}
