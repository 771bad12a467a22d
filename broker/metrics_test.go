package broker_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/observability"
	"github.com/isobar-mq/isobar/topic"
)

// TestMetricsCardinality: with per-topic labels off (the default), 10,000
// loaded topics with a subscription each produce a /metrics page under
// 1 MiB; the page does not grow with topics.
func TestMetricsCardinality(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 1000
	}
	tel, err := observability.New(context.Background(), observability.Config{Region: "test", Component: "broker", Instance: "b0"})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	e := startEnv(t, func(c *setup) { c.MeterProvider = tel.MeterProvider() })
	adm := e.b.AdminAPI().Topics
	ctx := context.Background()
	page := func() string {
		rec := httptest.NewRecorder()
		tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(rec.Body)
		return string(b)
	}
	mk := func(i int) error {
		name, err := topic.Parse(fmt.Sprintf("persistent://public/default/card-%d", i))
		if err != nil {
			return err
		}
		if err := adm.CreateTopic(ctx, name); err != nil {
			return err
		}
		return adm.CreateSubscription(ctx, name, "sub", nil)
	}
	// Traffic on one topic, so counters and histograms have series.
	c := e.client()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/card-traffic"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("m%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	p.Close()
	small := len(page())
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := mk(i); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if p := firstErr.Load(); p != nil {
		t.Fatal(*p)
	}
	body := page()
	t.Logf("/metrics: %d bytes with 1 topic, %d bytes with %d topics", small, len(body), n+1)
	if len(body) >= 1<<20 {
		t.Errorf("/metrics is %d bytes with %d topics, want < 1 MiB", len(body), n)
	}
	if !strings.Contains(grep(body, "pulsar_broker_topic_count{"), fmt.Sprintf("isobar_cluster=%q,isobar_component=\"broker\",isobar_region=\"test\"} %d", e.b.Config().Cluster, n+1)) {
		t.Errorf("topic count %d not in the page:\n%s", n+1, grep(body, "pulsar_broker_topic_count"))
	}
	if strings.Contains(body, "card-1") {
		t.Errorf("a topic name appears in the page with per-topic labels off")
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
