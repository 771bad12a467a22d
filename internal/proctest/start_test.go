package proctest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// TestProcessRestartsOnItsData: `isobar standalone` and `isobar region`,
// stopped with Ctrl-C (SIGINT, a drain) or SIGKILL and started again on
// their data directory, serve every topic and subscription they had: a
// subscription resumes after what it acknowledged, and a new one reads
// everything from the start. The standalone's bookies come back on other
// free ports (their identity is in their directories, not their address).
func TestProcessRestartsOnItsData(t *testing.T) {
	skipUnlessProcessTests(t)
	bin := Binary(t)
	for _, role := range []string{"standalone", "region"} {
		for _, stop := range []string{"SIGINT", "SIGKILL"} {
			t.Run(role+"/"+stop, func(t *testing.T) {
				dir := t.TempDir()
				var p *Proc
				var serviceURL, readyURL string
				switch role {
				case "standalone":
					bp, hp := FreePort(t), FreePort(t)
					p = New(t, bin, dir, "standalone", nil, "standalone", "--data-dir", filepath.Join(dir, "data"),
						"--broker-port", fmt.Sprint(bp), "--http-port", fmt.Sprint(hp))
					serviceURL, readyURL = fmt.Sprintf("pulsar://127.0.0.1:%d", bp), fmt.Sprintf("http://127.0.0.1:%d/readyz", hp)
				case "region":
					base := freePlan(t, 1)
					p = New(t, bin, dir, "region", map[string]any{
						"region": map[string]any{"name": "solo", "dataDir": filepath.Join(dir, "data"), "basePort": base},
					}, "region")
					serviceURL, readyURL = fmt.Sprintf("pulsar://127.0.0.1:%d", base), fmt.Sprintf("http://127.0.0.1:%d/readyz", base+1430)
				}
				p.ReadyURL = readyURL
				p.Start()
				p.WaitReady(2 * time.Minute)
				const topic = "persistent://public/default/restart"
				c := client(t, serviceURL)
				sendN(t, c, topic, 0, 20)
				consumeN(t, c, topic, "kept", 5, 0) // acknowledges 0..4
				c.Close()
				switch stop {
				case "SIGINT":
					p.Signal(syscall.SIGINT)
					if code := p.Wait(time.Minute); code != 0 {
						t.Fatalf("exit status %d after SIGINT\n%s", code, p.Tail(20))
					}
				case "SIGKILL":
					p.Kill()
				}
				p.Start()
				p.WaitReady(2 * time.Minute)
				c = client(t, serviceURL)
				defer c.Close()
				consumeN(t, c, topic, "kept", 15, 5)  // resumes after what it acknowledged
				consumeN(t, c, topic, "fresh", 20, 0) // everything is still there
				sendN(t, c, topic, 20, 5)
				consumeN(t, c, topic, "kept", 5, 20)
			})
		}
	}
}

// freePlan returns a base port whose port plan for regions regions (the
// ports `isobar dev` and `isobar region` use) is free now.
func freePlan(t *testing.T, regions int) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for try := 0; try < 200; try++ {
		// The whole plan stays under the kernel's ephemeral range.
		base := portLow + rand.IntN(portHigh-portLow-1530-100*regions)
		ok := true
		ports := []int{base + 10, base + 11}
		for i := range regions {
			b := base + 100*i
			ports = append(ports, b, b+20, b+21, b+30, b+31, b+40, b+41, b+42, base+1430+100*i)
		}
		for _, p := range ports {
			if portsGiven[p] {
				ok = false
				break
			}
			ln, err := net.Listen("tcp", Addr(p))
			if err != nil {
				ok = false
				break
			}
			ln.Close()
		}
		if ok {
			for _, p := range ports {
				portsGiven[p] = true
			}
			return base
		}
	}
	t.Fatal("no free port plan")
	return 0
}

func client(t *testing.T, url string) pulsar.Client {
	t.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, OperationTimeout: 30 * time.Second, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sendN sends payloads "m<from>".."m<from+n-1>".
func sendN(t *testing.T, c pulsar.Client, topic string, from, n int) {
	t.Helper()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := from; i < from+n; i++ {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("m%d", i))}); err != nil {
			t.Fatalf("send m%d: %v", i, err)
		}
	}
}

// consumeN receives n messages on sub (from the earliest for a new one),
// expects m<from>..m<from+n-1> in order and acknowledges them.
func consumeN(t *testing.T, c pulsar.Client, topic, sub string, n, from int) {
	t.Helper()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := from; i < from+n; i++ {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("%s: waiting for m%d: %v", sub, i, err)
		}
		if got := string(m.Payload()); got != fmt.Sprintf("m%d", i) {
			t.Fatalf("%s: got %s, want m%d", sub, got, i)
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
}

// TestProcessBadStarts: a process that cannot start as configured exits
// with status 2 and a message saying why, without touching data: unknown
// configuration keys (file and environment), a port in use, a metadata
// store that does not answer (after the bounded retry), and a bookie whose
// directories fail its identity checks.
func TestProcessBadStarts(t *testing.T) {
	skipUnlessProcessTests(t)
	bin := Binary(t)
	dir := t.TempDir()
	// A metadata store for the cases that need one.
	etcdHTTP := Addr(FreePort(t))
	etcdClient := Addr(FreePort(t))
	meta := New(t, bin, dir, "etcd", map[string]any{"etcd": map[string]any{
		"name": "m", "dataDir": filepath.Join(dir, "etcd", "data"), "clientAddr": etcdClient, "peerAddr": Addr(FreePort(t)), "httpAddr": etcdHTTP,
	}}, "metastore")
	meta.ReadyURL = "http://" + etcdHTTP + "/readyz"
	meta.Start()
	meta.WaitReady(time.Minute)
	endpoints := []string{"http://" + etcdClient}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()

	bookieDirs := func(name string) map[string]any {
		return map[string]any{
			"region": "east", "listenAddr": Addr(FreePort(t)), "httpAddr": Addr(FreePort(t)),
			"journalDir": filepath.Join(dir, name, "journal"), "ledgerDir": filepath.Join(dir, name, "ledgers"),
		}
	}
	// A bookie of region east that ran once, to have directories.
	good := New(t, bin, dir, "good-bookie", map[string]any{"metastore": map[string]any{"endpoints": endpoints}, "bookie": bookieDirs("good-bookie")}, "bookie")
	good.Start()
	waitFor(t, time.Minute, "the bookie serves", func() bool { return strings.Contains(good.Log(), "bookie serving") })
	if err := good.Term(time.Minute); err != nil {
		t.Fatal(err)
	}
	otherRegion := bookieDirs("good-bookie")
	otherRegion["region"] = "west"

	cases := []struct {
		name   string
		config map[string]any
		env    []string
		args   []string
		want   string
	}{
		{"unknown key in the file", map[string]any{"broker": map[string]any{"region": "east", "nosuch": 1}}, nil, []string{"broker"}, "nosuch"},
		{"unknown environment variable", nil, []string{"ISOBAR_BROKER_NOSUCH=1"}, []string{"broker", "--region", "east", "--metastore", endpoints[0]}, "ISOBAR_BROKER_NOSUCH"},
		{"bad value", map[string]any{"broker": map[string]any{"region": "East Coast"}}, nil, []string{"broker"}, "broker.region"},
		{"port in use", map[string]any{
			"metastore": map[string]any{"endpoints": endpoints},
			"broker":    map[string]any{"region": "east", "listenAddr": busy.Addr().String(), "httpListenAddr": Addr(FreePort(t))},
		}, nil, []string{"broker"}, "cannot listen"},
		{"metadata store unreachable", map[string]any{
			"metastore": map[string]any{"endpoints": []string{"http://" + Addr(FreePort(t))}, "startupTimeout": "3s", "dialTimeout": "1s"},
			"broker":    map[string]any{"region": "east", "listenAddr": Addr(FreePort(t)), "httpListenAddr": Addr(FreePort(t))},
		}, nil, []string{"broker"}, "did not answer within 3s"},
		{"bookie directories of another region", map[string]any{
			"metastore": map[string]any{"endpoints": endpoints}, "bookie": otherRegion,
		}, nil, []string{"bookie"}, "check 3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := New(t, bin, dir, strings.ReplaceAll(tc.name, " ", "-"), tc.config, tc.args...)
			p.SetEnv(tc.env...)
			start := time.Now()
			p.Start()
			code := p.Wait(time.Minute)
			if code != 2 {
				t.Fatalf("exit status %d, want 2\n%s", code, p.Tail(20))
			}
			if !strings.Contains(p.Log(), tc.want) {
				t.Fatalf("the message does not say %q:\n%s", tc.want, p.Tail(20))
			}
			t.Logf("exit 2 after %v: %s", time.Since(start).Round(time.Millisecond), lastLine(p.Log()))
		})
	}
	// The refused bookie touched nothing: its directories start again.
	good.Start()
	waitFor(t, time.Minute, "the bookie serves again", func() bool { return strings.Count(good.Log(), "bookie serving") == 2 })
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestProcessDevAndRegionsAreInterchangeable: the federation `isobar dev`
// runs and a global store plus one `isobar region` process per region,
// with the same base port and data directories, are the same federation:
// what dev stored is served by the region processes, and replication
// goes on in both directions.
func TestProcessDevAndRegionsAreInterchangeable(t *testing.T) {
	skipUnlessProcessTests(t)
	bin := Binary(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	base := freePlan(t, 2)
	r0, r1 := fmt.Sprintf("pulsar://127.0.0.1:%d", base), fmt.Sprintf("pulsar://127.0.0.1:%d", base+100)
	ready0, ready1 := fmt.Sprintf("http://127.0.0.1:%d/readyz", base+1430), fmt.Sprintf("http://127.0.0.1:%d/readyz", base+1530)
	dev := New(t, bin, dir, "dev", nil, "dev", "--data-dir", data, "--regions", "east,west", "--base-port", fmt.Sprint(base))
	dev.ReadyURL = ready1
	dev.Start()
	dev.WaitReady(3 * time.Minute)
	const topic = "persistent://geo/replicated/swap"
	c0, c1 := client(t, r0), client(t, r1)
	consumeN(t, c1, topic, "west", 0, 0) // the subscription exists before the sends
	sendN(t, c0, topic, 0, 10)
	consumeN(t, c1, topic, "west", 5, 0)
	c0.Close()
	c1.Close()
	dev.Signal(syscall.SIGINT)
	if code := dev.Wait(time.Minute); code != 0 {
		t.Fatalf("dev exit status %d\n%s", code, dev.Tail(20))
	}

	gc, gp := base+10, base+11
	global := New(t, bin, dir, "global", nil, "metastore", "--name", "global", "--data-dir", filepath.Join(data, "global"),
		"--client-addr", Addr(gc), "--peer-addr", Addr(gp))
	global.Start()
	regions := map[string]*Proc{}
	for i, name := range []string{"east", "west"} {
		p := New(t, bin, dir, "region-"+name, nil, "region", "--name", name, "--index", fmt.Sprint(i), "--regions", "east,west",
			"--base-port", fmt.Sprint(base), "--data-dir", filepath.Join(data, name), "--global", "http://"+Addr(gc))
		p.ReadyURL = []string{ready0, ready1}[i]
		p.Start()
		regions[name] = p
	}
	for _, p := range regions {
		p.WaitReady(3 * time.Minute)
	}
	c0, c1 = client(t, r0), client(t, r1)
	defer c0.Close()
	defer c1.Close()
	consumeN(t, c1, topic, "west", 5, 5) // what dev stored and replicated
	consumeN(t, c0, topic, "east", 0, 0)
	sendN(t, c1, topic, 10, 5) // and replication goes on, the other way too
	consumeN(t, c0, topic, "east", 15, 0)
	consumeN(t, c1, topic, "west", 5, 10)
}
