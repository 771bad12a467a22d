package broker_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/sirupsen/logrus"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/internal/testcluster"
)

// env is a region for broker tests: embedded etcd, three real bookies and
// one broker on a loopback port.
type env struct {
	t      testing.TB
	cl     *testcluster.Cluster
	lc     *ledger.Client
	pol    *policy.Store
	b      *broker.Broker
	url    string
	modify func(*setup)
}

// setup is a broker's settings and dependencies, changed by a test's
// modify function before the broker starts.
type setup struct {
	broker.Config
	broker.Deps
}

func startEnv(t testing.TB, modify func(*setup)) *env {
	t.Helper()
	return startEnvWith(t, nil, modify)
}

// startEnvWith is startEnv with the policy store's settings changed by
// polCfg (its limits, say) before it is made.
func startEnvWith(t testing.TB, polCfg func(*policy.Config), modify func(*setup)) *env {
	t.Helper()
	cl := testcluster.Start(t, testcluster.Options{Bookies: 3})
	lc, err := ledger.NewClient(cl.Connect(), ledger.Config{Region: cl.Region, Logger: cl.Logger(), RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close() })
	pc := policy.Config{LocalCluster: "test"}
	if polCfg != nil {
		polCfg(&pc)
	}
	pol, err := policy.New(cl.Connect(), pc)
	if err != nil {
		t.Fatal(err)
	}
	if err := pol.EnsureStandalone(context.Background(), "test", policy.ClusterData{ServiceURL: "http://127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, cl: cl, lc: lc, pol: pol, modify: modify}
	e.startBroker()
	return e
}

func (e *env) startBroker() {
	t := e.t
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.url = "pulsar://" + ln.Addr().String()
	s := setup{
		Config: broker.Config{Region: e.cl.Region, ServiceURL: e.url},
		Deps: broker.Deps{
			Meta:    e.cl.Connect(),
			Ledgers: e.lc,
			Logger:  e.cl.Logger(),
			Namespaces: broker.PolicyNamespaces{Store: e.pol, Default: policy.AutoTopicCreation{
				AllowAutoTopicCreation: true, TopicType: policy.TopicTypeNonPartitioned}},
			AuthPolicies: policy.AuthSource{Store: e.pol}, // (used when a test turns authorization on)
		},
	}
	if e.modify != nil {
		e.modify(&s)
	}
	b, err := broker.New(s.Config, s.Deps)
	if err != nil {
		t.Fatal(err)
	}
	e.b = b
	b.Start()
	go b.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b.Shutdown(ctx)
	})
}

// client returns a Pulsar client connected to the broker.
func (e *env) client() pulsar.Client {
	e.t.Helper()
	return e.clientWith(nil)
}

// clientWith is client with its options changed by modify (nil: none).
func (e *env) clientWith(modify func(*pulsar.ClientOptions)) pulsar.Client {
	e.t.Helper()
	l := logrus.New()
	l.SetLevel(logrus.WarnLevel)
	opts := pulsar.ClientOptions{
		URL:               e.url,
		OperationTimeout:  15 * time.Second,
		ConnectionTimeout: 5 * time.Second,
		Logger:            plog.NewLoggerWithLogrus(l),
	}
	if modify != nil {
		modify(&opts)
	}
	c, err := pulsar.NewClient(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
