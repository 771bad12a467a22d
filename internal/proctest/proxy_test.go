package proctest

import (
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestProcessProxies: two `isobar proxy` processes behind one address (a
// TCP balancer that takes them in turn, as a load balancer or DNS would)
// in front of a region of two brokers, the load's clients knowing only
// that address. A proxy stopped with SIGTERM exits 0, and neither that
// nor one killed with SIGKILL loses anything: the clients go on through
// the other, and every acknowledged message is delivered, once, in
// order. (A multi-host service URL would not do: pulsar-client-go takes
// its hosts in turn for the lookup and then for the connection, so with
// two hosts and one down, every retry pairs a live one with the dead
// one.)
func TestProcessProxies(t *testing.T) {
	skipUnlessProcessTests(t)
	f := StartFederation(t, Layout{
		Regions: []string{"east"}, Global: 1, Metastores: 1, Bookies: 3, Brokers: 2,
		BrokerLeaseTTL: 5 * time.Second,
	}, t.TempDir())
	f.Replicate(t, "acme", "px")
	east := f.Regions[0]
	dir := t.TempDir()
	var proxies []*Proc
	var hosts []string
	for i := range 2 {
		bp, hp := FreePort(t), FreePort(t)
		name := fmt.Sprintf("proxy-%d", i)
		p := New(t, f.bin, dir, name, map[string]any{
			"metastore": map[string]any{"endpoints": east.Meta.Endpoints},
			"proxy":     map[string]any{"region": "east", "name": name, "listenAddr": Addr(bp), "httpListenAddr": Addr(hp)},
		}, "proxy")
		p.ReadyURL = fmt.Sprintf("http://%s/readyz", Addr(hp))
		p.Start()
		proxies = append(proxies, p)
		hosts = append(hosts, Addr(bp))
	}
	waitAll(t, proxies, time.Minute)
	var sources []Source
	for i := range 3 {
		sources = append(sources, Source{Region: "east", Topic: fmt.Sprintf("persistent://acme/px/t%d", i)})
	}
	lb := balance(t, hosts)
	l := StartLoad(t, map[string]string{"east": "pulsar://" + lb}, sources, 8, 20*time.Millisecond)
	waitProgress(t, l, 200, time.Minute)

	if err := proxies[0].Term(time.Minute); err != nil {
		t.Fatalf("proxy-0: SIGTERM: %v\n%s", err, proxies[0].Tail(30))
	}
	acked := l.Acked()
	waitFor(t, time.Minute, "load flowing through proxy-1 alone", func() bool { return l.Acked() > acked+100 })
	proxies[0].Start()
	proxies[0].WaitReady(time.Minute)
	proxies[1].Kill()
	acked = l.Acked()
	waitFor(t, time.Minute, "load flowing after proxy-1 was killed", func() bool { return l.Acked() > acked+100 })

	l.StopProducing()
	if err := l.WaitDelivered(2 * time.Minute); err != nil {
		t.Errorf("after the proxies' stops: %v", err)
	}
	r := l.Check()
	t.Logf("through the proxies: acknowledged %d, delivered %d, redeliveries %d, send errors %d", r.Acked, r.Delivered, r.Redeliveries, len(l.SendErrors()))
	assertReport(t, r)
}

// balance listens on a loopback port and hands each connection to the
// next of backends that accepts one, copying bytes both ways; it returns
// its address. It stops with the test.
func balance(t *testing.T, backends []string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		next atomic.Uint64
		wg   sync.WaitGroup
		mu   sync.Mutex
		open = map[net.Conn]bool{}
	)
	track := func(c net.Conn, add bool) {
		mu.Lock()
		defer mu.Unlock()
		if add {
			open[c] = true
		} else {
			delete(open, c)
		}
	}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			var out net.Conn
			for range backends {
				addr := backends[next.Add(1)%uint64(len(backends))]
				if out, err = net.DialTimeout("tcp", addr, time.Second); err == nil {
					break
				}
			}
			if out == nil {
				in.Close()
				continue
			}
			track(in, true)
			track(out, true)
			wg.Add(2)
			for _, pair := range [][2]net.Conn{{in, out}, {out, in}} {
				go func() {
					defer wg.Done()
					io.Copy(pair[0], pair[1])
					pair[0].Close()
					pair[1].Close()
					track(pair[0], false)
				}()
			}
		}
	}()
	return ln.Addr().String()
}
