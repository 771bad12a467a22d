package proxy_test

import (
	"context"
	"fmt"
	"github.com/isobar-mq/isobar/roles"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/sirupsen/logrus"

	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/observability"
	"github.com/isobar-mq/isobar/region"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// The harness: a region's metadata store and bookies (region.Start with
// no brokers), brokers and proxies as the region package builds them for
// `isobar broker` and `isobar proxy`, each on free loopback ports.

const regionName = "px"

// setup is what a test may change before the parts start.
type setup struct {
	brokers int
	broker  roles.BrokerConfig // template: names and addresses are filled in
	proxies int
	proxy   roles.ProxyConfig // template
}

type env struct {
	t       *testing.T
	ctx     context.Context
	region  *region.Region
	meta    metastore.Config
	setup   setup
	brokers []*roles.Broker
	killed  map[int]bool // brokers stopped as by a crash
	proxies []*roles.Proxy
}

// kill stops broker i as a crash would (its topics stay loaded in the
// dead process, its lease expires by itself).
func (e *env) kill(i int) {
	if e.killed == nil {
		e.killed = map[int]bool{}
	}
	e.killed[i] = true
	e.brokers[i].Abort()
}

func startEnv(t *testing.T, modify func(*setup)) *env {
	t.Helper()
	s := setup{brokers: 1, proxies: 1}
	s.broker.LeaseTTL = 2 * time.Second
	if modify != nil {
		modify(&s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	r, err := region.Start(ctx, region.Config{Name: regionName, DataDir: t.TempDir(), Brokers: -1, TelemetryOff: true}, region.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(context.Background()) })
	e := &env{t: t, ctx: ctx, region: r, setup: s, meta: metastore.Config{Endpoints: []string{r.Endpoints().MetadataURL}}}
	for i := range s.brokers {
		e.startBroker(i)
	}
	for range s.proxies {
		e.startProxy()
	}
	return e
}

// startBroker starts broker i (its name is b<i>).
func (e *env) startBroker(i int) *roles.Broker {
	e.t.Helper()
	bc := e.setup.broker
	bc.Region, bc.Name = regionName, fmt.Sprintf("b%d", i)
	bc.ListenAddr, bc.HTTPListenAddr = "127.0.0.1:0", "127.0.0.1:0"
	if bc.TLS.Enabled() {
		bc.TLSListenAddr, bc.HTTPSListenAddr = "127.0.0.1:0", "127.0.0.1:0"
	}
	bc.DataDir = filepath.Join(e.t.TempDir(), bc.Name)
	b := roles.NewBroker(bc, e.meta, metastore.Config{}, roles.Deps{})
	if err := b.Start(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { b.Shutdown(context.Background()) })
	e.brokers = append(e.brokers, b)
	return b
}

// startProxy starts one more proxy.
func (e *env) startProxy() *roles.Proxy {
	e.t.Helper()
	pc := e.setup.proxy
	pc.Region, pc.Name = regionName, fmt.Sprintf("p%d", len(e.proxies))
	pc.ListenAddr, pc.HTTPListenAddr = "127.0.0.1:0", "127.0.0.1:0"
	if pc.TLS.Enabled() {
		pc.TLSListenAddr, pc.HTTPSListenAddr = "127.0.0.1:0", "127.0.0.1:0"
	}
	tel, err := observability.New(e.ctx, observability.Config{Region: regionName, Component: "proxy", Instance: pc.Name})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { tel.Shutdown(context.Background()) })
	p := roles.NewProxy(pc, e.meta, roles.Deps{Telemetry: tel})
	if err := p.Start(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { p.Shutdown(context.Background()) })
	e.proxies = append(e.proxies, p)
	waitFor(e.t, 30*time.Second, "the proxy to see every broker", func() bool { return p.Ready(e.ctx) == nil })
	return p
}

// serviceURL is the Pulsar URL of every proxy (pulsar://p0,p1,...).
func (e *env) serviceURL() string {
	var hosts []string
	for _, p := range e.proxies {
		hosts = append(hosts, strings.TrimPrefix(p.Endpoints().ServiceURL, "pulsar://"))
	}
	return "pulsar://" + strings.Join(hosts, ",")
}

// client is a pulsar-client-go client of the proxies.
func (e *env) client(opts pulsar.ClientOptions) pulsar.Client {
	e.t.Helper()
	if opts.URL == "" {
		opts.URL = e.serviceURL()
	}
	if opts.OperationTimeout == 0 {
		opts.OperationTimeout = 30 * time.Second
	}
	l := logrus.New()
	l.SetLevel(logrus.ErrorLevel)
	opts.Logger = plog.NewLoggerWithLogrus(l)
	c, err := pulsar.NewClient(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	return c
}

// owner is the index of the live broker that has topic loaded (-1:
// none).
func (e *env) owner(topic string) int {
	for i, b := range e.brokers {
		if b.Broker() == nil || e.killed[i] {
			continue
		}
		for _, name := range b.Broker().Topics() {
			if name == topic {
				return i
			}
		}
	}
	return -1
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rawConn is a Pulsar protocol connection driven frame by frame.
type rawConn struct {
	t  *testing.T
	nc net.Conn
}

func dialRaw(t *testing.T, serviceURL string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", strings.TrimPrefix(serviceURL, "pulsar://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

func (r *rawConn) send(cmd *pb.BaseCommand) {
	r.t.Helper()
	f, err := wire.AppendCommand(nil, cmd)
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.nc.Write(f); err != nil {
		r.t.Fatal(err)
	}
}

// recv reads the next command other than a PING.
func (r *rawConn) recv() *pb.BaseCommand {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		raw, err := wire.ReadFrame(r.nc, 0, nil)
		if err != nil {
			r.t.Fatalf("read: %v", err)
		}
		f, err := wire.DecodeFrame(raw)
		if err != nil {
			r.t.Fatal(err)
		}
		if f.Cmd.GetType() != pb.BaseCommand_PING {
			return f.Cmd
		}
	}
}

// expectClosed reads what the peer still sends and checks that it then
// closes the connection; it returns the last command.
func (r *rawConn) expectClosed() *pb.BaseCommand {
	r.t.Helper()
	var last *pb.BaseCommand
	r.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		raw, err := wire.ReadFrame(r.nc, 0, nil)
		if err != nil {
			return last
		}
		f, err := wire.DecodeFrame(raw)
		if err != nil {
			r.t.Fatal(err)
		}
		last = f.Cmd
	}
}

func connectCmd(proxyTo string, method string, data []byte) *pb.BaseCommand {
	pv, v := int32(20), "raw-test"
	c := &pb.CommandConnect{ClientVersion: &v, ProtocolVersion: &pv}
	if proxyTo != "" {
		c.ProxyToBrokerUrl = &proxyTo
	}
	if method != "" {
		c.AuthMethodName, c.AuthData = &method, data
	}
	return &pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: c}
}
