package region_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/sirupsen/logrus"

	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/region"
	"github.com/isobar-mq/isobar/roles"
	"github.com/isobar-mq/isobar/topic"
)

// TestLoadReportUnderTraffic: while a Pulsar producer and consumer move
// messages through a topic, the broker's load report (pulsaradmin's
// GetLoadReport, GET /admin/v2/broker-stats/load-report) shows the rates
// in and out, the topic and connection counts, and the topic's bundle
// among the owned ones with its rates and topic count.
func TestLoadReportUnderTraffic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := region.Start(ctx, region.Config{Name: "load", DataDir: t.TempDir(),
		Broker: roles.BrokerConfig{LoadReportInterval: 200 * time.Millisecond}}, region.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(context.Background()) })
	const ns = "public/load"
	if err := r.Policies().CreateNamespace(ctx, ns, nil); err != nil {
		t.Fatal(err)
	}
	l := logrus.New()
	l.SetLevel(logrus.ErrorLevel)
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: r.Brokers()[0].ServiceURL, OperationTimeout: 30 * time.Second,
		Logger: plog.NewLoggerWithLogrus(l)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	name := "persistent://" + ns + "/busy"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: name, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	prod, err := c.CreateProducer(pulsar.ProducerOptions{Topic: name})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	tctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for m := range cons.Chan() {
			cons.Ack(m)
		}
	}()
	sent := make(chan error, 1)
	go func() {
		for tctx.Err() == nil {
			if _, err := prod.Send(tctx, &pulsar.ProducerMessage{Payload: []byte(strings.Repeat("x", 100))}); err != nil && tctx.Err() == nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()

	adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: r.Brokers()[0].WebServiceURL})
	if err != nil {
		t.Fatal(err)
	}
	tn, _ := topic.Parse(name)
	bundle := ns + "/" + topic.BundleFor(tn, topic.Bundles(topic.DefaultBundles)).String()
	var rep *utils.LocalBrokerData
	testcluster.WaitFor(t, 30*time.Second, func() bool {
		rep, err = adm.BrokerStats().GetLoadReport()
		if err != nil {
			return false
		}
		st := rep.LastStats[bundle]
		return rep.MsgRateIn > 0 && rep.MsgRateOut > 0 && rep.MsgThroughputIn >= 100*rep.MsgRateIn &&
			st != nil && st.TopicsNum == 1 && st.MsgRateIn > 0 && st.MsgRateOut > 0
	})
	if rep.NumTopics < 1 || rep.NumBundles < 1 || rep.CPU.Limit != 100 || rep.CPU.Usage < 0 ||
		rep.WebServiceURL != r.Brokers()[0].WebServiceURL || rep.LoadReportType != "LocalBrokerData" ||
		rep.LastUpdate == 0 || !contains(rep.Bundles, bundle) {
		t.Fatalf("load report %+v", rep)
	}
	stop()
	if err := <-sent; err != nil {
		t.Fatalf("send: %v", err)
	}
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}
