package provider

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/sirupsen/logrus"

	"github.com/isobar-mq/isobar/region"
)

// TestAccReplicatedNamespace applies terraform/examples/multi-region (a
// namespace replicated across the three regions), then produces in
// us-east with the Pulsar Go client and receives every message in eu-west
// and in ap-south.
func TestAccReplicatedNamespace(t *testing.T) {
	f := accTest(t)
	var urls []config.Variable
	for _, r := range f.Regions {
		urls = append(urls, config.StringVariable(r.Endpoints().WebServiceURL))
	}
	resource.Test(t, resource.TestCase{
		Steps: []resource.TestStep{{
			// The file has a provider block, so the provider is given
			// here rather than on the test case (terraform-plugin-testing
			// insists).
			ProtoV6ProviderFactories: factories,
			ConfigFile:               config.StaticFile("../examples/multi-region/main.tf"),
			ConfigVariables:          config.Variables{"web_service_url": config.ListVariable(urls...)},
			Check: resource.ComposeAggregateTestCheckFunc(
				resource.TestCheckResourceAttr("isobar_namespace.orders", "replication_clusters.#", "3"),
				func(s *terraform.State) error {
					return produceAndReceive(t, f, s.RootModule().Outputs["topic"].Value.(string), 50)
				},
			),
		}},
	})
}

// produceAndReceive subscribes in the second and third regions (from the
// earliest message), sends n messages in the first and waits until each
// subscription has all of them, once each.
func produceAndReceive(t *testing.T, f *region.Federation, topicName string, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	clients := make([]pulsar.Client, 3)
	for i := range clients {
		c, err := pulsar.NewClient(pulsar.ClientOptions{URL: f.Regions[i].Endpoints().ServiceURL, OperationTimeout: 30 * time.Second, Logger: quietLogger()})
		if err != nil {
			return err
		}
		defer c.Close()
		clients[i] = c
	}
	name := func(i int) string { return f.Regions[i].Name() }
	consumers := make([]pulsar.Consumer, 3)
	for i := 1; i < 3; i++ {
		cons, err := clients[i].Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "check",
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			return fmt.Errorf("subscribe in %s: %w", name(i), err)
		}
		defer cons.Close()
		consumers[i] = cons
	}
	prod, err := clients[0].CreateProducer(pulsar.ProducerOptions{Topic: topicName})
	if err != nil {
		return fmt.Errorf("producer in %s: %w", name(0), err)
	}
	defer prod.Close()
	for i := range n {
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m%d", i)}); err != nil {
			return fmt.Errorf("send %d in %s: %w", i, name(0), err)
		}
	}
	for k, cons := range consumers[1:] {
		k++
		got := map[string]bool{}
		for len(got) < n {
			m, err := cons.Receive(ctx)
			if err != nil {
				return fmt.Errorf("%s: after %d of %d messages: %w", name(k), len(got), n, err)
			}
			p := string(m.Payload())
			if got[p] {
				return fmt.Errorf("%s: %s received twice", name(k), p)
			}
			got[p] = true
			cons.Ack(m)
		}
		t.Logf("%s received all %d messages sent in %s", name(k), n, name(0))
	}
	return nil
}

func quietLogger() plog.Logger {
	l := logrus.New()
	l.SetLevel(logrus.ErrorLevel)
	return plog.NewLoggerWithLogrus(l)
}
