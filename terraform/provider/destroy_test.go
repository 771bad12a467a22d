package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/isobar-mq/isobar/terraform/provider/client"
)

// TestAccDestroyAndApplyAgainStartsEmpty is the reproduction
// through the provider, on three regions: a tenant, a namespace with
// primary us-east replicated everywhere, a one-partition topic and a
// subscription from earliest; a, b and c produced in us-east reach every
// region; `destroy` leaves no region holding any of them, and after
// `apply` again every region's copy is empty and the subscription from
// earliest receives nothing old.
func TestAccDestroyAndApplyAgainStartsEmpty(t *testing.T) {
	f := accTest(t)
	p := providerBlock(f, "10s")
	var regions []string
	for _, r := range f.Regions {
		regions = append(regions, fmt.Sprintf("%q", r.Name()))
	}
	cfg := p + fmt.Sprintf(`
resource "isobar_tenant" "t" {
  name             = "tf-again"
  allowed_clusters = [%[1]s]
}
resource "isobar_namespace" "ns" {
  tenant               = isobar_tenant.t.name
  name                 = "ns"
  replication_clusters = [%[1]s]
  primary_region       = %[2]q
}
resource "isobar_topic" "t" {
  tenant     = isobar_namespace.ns.tenant
  namespace  = isobar_namespace.ns.name
  name       = "orders"
  partitions = 1
}
resource "isobar_subscription" "s" {
  topic            = isobar_topic.t.id
  name             = "fulfilment"
  initial_position = "earliest"
}
`, strings.Join(regions, ", "), f.Regions[0].Name())
	const topicName = "persistent://tf-again/ns/orders"
	const partPath = "/admin/v2/persistent/tf-again/ns/orders-partition-0/internalStats"
	// stored is what each region stores of the partition (0: no copy).
	stored := func() (map[string]int64, error) {
		out := map[string]int64{}
		for i, r := range f.Regions {
			var st struct {
				TotalSize int64 `json:"totalSize"`
			}
			err := admin(t, f, i).Get(context.Background(), partPath, &st)
			if err != nil && !client.IsNotFound(err) {
				return nil, fmt.Errorf("%s: %w", r.Name(), err)
			}
			out[r.Name()] = st.TotalSize
		}
		return out, nil
	}
	produced := func(*terraform.State) error {
		c, err := pulsar.NewClient(pulsar.ClientOptions{URL: f.Regions[0].Endpoints().ServiceURL, OperationTimeout: 30 * time.Second, Logger: quietLogger()})
		if err != nil {
			return err
		}
		defer c.Close()
		prod, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topicName})
		if err != nil {
			return err
		}
		defer prod.Close()
		for _, m := range []string{"a", "b", "c"} {
			if _, err := prod.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(m)}); err != nil {
				return err
			}
		}
		deadline := time.Now().Add(time.Minute)
		for {
			st, err := stored()
			if err != nil {
				return err
			}
			all := true
			for _, b := range st {
				all = all && b > 0
			}
			if all {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("a, b, c not in every region after a minute: %v", st)
			}
			time.Sleep(100 * time.Millisecond) // poll interval, not synchronisation
		}
	}
	empty := func(*terraform.State) error {
		st, err := stored()
		if err != nil {
			return err
		}
		for r, b := range st {
			if b != 0 {
				return fmt.Errorf("%s stores %d bytes of the topic", r, b)
			}
		}
		return nil
	}
	nothingOld := func(*terraform.State) error {
		c, err := pulsar.NewClient(pulsar.ClientOptions{URL: f.Regions[0].Endpoints().ServiceURL, OperationTimeout: 30 * time.Second, Logger: quietLogger()})
		if err != nil {
			return err
		}
		defer c.Close()
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "fulfilment"})
		if err != nil {
			return err
		}
		defer cons.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if m, err := cons.Receive(ctx); err == nil {
			return fmt.Errorf("the subscription from earliest received %q from before the destroy", m.Payload())
		}
		return empty(nil)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{Config: cfg, Check: produced},
			{Config: cfg, Destroy: true},
			{
				PreConfig: func() {
					if err := empty(nil); err != nil {
						t.Errorf("after the destroy: %v", err)
					}
				},
				Config: cfg, Check: nothingOld,
			},
		},
	})
}
