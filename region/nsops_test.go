package region_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/sirupsen/logrus"

	"github.com/isobar-mq/isobar/broker/ownership"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/region"
	"github.com/isobar-mq/isobar/topic"
)

// twoBrokers starts a region of two brokers and a Pulsar client that
// knows both.
func twoBrokers(t *testing.T) (*region.Region, pulsar.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := region.Start(ctx, region.Config{Name: "ops", DataDir: t.TempDir(), Brokers: 2}, region.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(context.Background()) })
	var hosts []string
	for _, b := range r.Brokers() {
		hosts = append(hosts, strings.TrimPrefix(b.ServiceURL, "pulsar://"))
	}
	l := logrus.New()
	l.SetLevel(logrus.ErrorLevel)
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: "pulsar://" + strings.Join(hosts, ","), OperationTimeout: 30 * time.Second,
		Logger: plog.NewLoggerWithLogrus(l)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return r, c
}

func adminOf(t *testing.T, r *region.Region, i int) pulsaradmin.Client {
	t.Helper()
	c, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: r.Brokers()[i].WebServiceURL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// owners maps each owned bundle of namespace ns to the broker owning it
// and when it acquired the bundle.
func owners(r *region.Region, ns string) map[topic.Bundle]ownership.OwnedBundle {
	out := map[topic.Bundle]ownership.OwnedBundle{}
	for i := range r.Brokers() {
		for _, ob := range r.Owned(i) {
			if ob.Namespace == ns {
				out[ob.Bundle] = ob
			}
		}
	}
	return out
}

func ownerOf(r *region.Region, ns string, b topic.Bundle) int {
	for i := range r.Brokers() {
		for _, ob := range r.Owned(i) {
			if ob.Namespace == ns && ob.Bundle == b {
				return i
			}
		}
	}
	return -1
}

// TestNamespaceUnloadUnderLoad unloads a namespace whose bundles two
// brokers own while producers send to its topics without pause: every
// bundle is released and placed again (a new acquisition), every message
// is acknowledged, none fails, and the consumers receive every one. The
// request goes to one broker, which forwards the other broker's bundles
// to it; a bundle unload sent to the broker that does not own the
// bundle is redirected to the one that does. Clear backlog and
// unsubscribe over the whole namespace reach both brokers the same way.
func TestNamespaceUnloadUnderLoad(t *testing.T) {
	r, c := twoBrokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns = "public/ops"
	if err := r.Policies().CreateNamespace(ctx, ns, nil); err != nil {
		t.Fatal(err)
	}
	adm0 := adminOf(t, r, 0)
	var names []string
	for i := range 8 {
		names = append(names, fmt.Sprintf("persistent://%s/t%d", ns, i))
	}
	for _, n := range names {
		tn, _ := utils.GetTopicName(n)
		if err := adm0.Subscriptions().Create(*tn, "hold", utils.Earliest); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topics: names, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var (
		mu       sync.Mutex
		received = map[string]bool{}
		acked    = map[string]bool{}
		failed   []error
	)
	go func() {
		for m := range cons.Chan() {
			mu.Lock()
			received[string(m.Payload())] = true
			mu.Unlock()
			cons.Ack(m)
		}
	}()
	var prods []pulsar.Producer
	for _, n := range names {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: n, SendTimeout: 2 * time.Minute, DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		prods = append(prods, p)
	}
	if o := owners(r, ns); len(o) != topic.DefaultBundles {
		t.Fatalf("owned bundles of %s: %v", ns, o)
	}

	const rounds = 300
	halfway := make(chan struct{})
	var wg sync.WaitGroup
	go func() {
		for i := range rounds {
			if i == rounds/3 {
				close(halfway)
			}
			for j, p := range prods {
				payload := fmt.Sprintf("t%d-%d", j, i)
				wg.Add(1)
				p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(payload)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					defer wg.Done()
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						failed = append(failed, fmt.Errorf("%s: %w", payload, err))
						return
					}
					acked[payload] = true
				})
			}
		}
	}()
	<-halfway
	// The request goes to a broker that does not own every bundle: it
	// forwards the others' to their owner.
	u := 0
	if len(r.Owned(0)) == topic.DefaultBundles {
		u = 1
	}
	t.Logf("unloading through broker %d; bundles owned: %d and %d", u, len(r.Owned(0)), len(r.Owned(1)))
	unloadAt := time.Now()
	if err := adminOf(t, r, u).Namespaces().UnloadWithContext(ctx, ns); err != nil {
		t.Fatalf("unload %s: %v", ns, err)
	}
	// Every bundle was released and is owned afresh.
	waitFor(t, time.Minute, "every bundle placed again after the unload", func() bool {
		o := owners(r, ns)
		if len(o) != topic.DefaultBundles {
			return false
		}
		for _, ob := range o {
			if !ob.Acquired.After(unloadAt) {
				return false
			}
		}
		return true
	})
	// One bundle through the broker that does not own it.
	var b topic.Bundle
	for b = range owners(r, ns) {
		break
	}
	other := 1 - ownerOf(r, ns, b)
	bundleAt := time.Now()
	if err := adminOf(t, r, other).Namespaces().UnloadNamespaceBundleWithContext(ctx, ns, b.String()); err != nil {
		t.Fatalf("unload bundle %s through broker %d: %v", b, other, err)
	}
	waitFor(t, time.Minute, "the bundle placed again", func() bool {
		ob, ok := owners(r, ns)[b]
		return ok && ob.Acquired.After(bundleAt)
	})
	wg.Wait()
	mu.Lock()
	if len(failed) > 0 {
		t.Fatalf("%d sends failed, the first: %v", len(failed), failed[0])
	}
	if len(acked) != rounds*len(names) {
		t.Fatalf("%d of %d messages acknowledged", len(acked), rounds*len(names))
	}
	mu.Unlock()
	waitFor(t, time.Minute, "every acknowledged message received", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for p := range acked {
			if !received[p] {
				return false
			}
		}
		return true
	})

	// Clear the hold subscription's backlog and then delete it, each with
	// one request to a broker that does not own every bundle.
	k := 0
	if len(r.Owned(0)) >= topic.DefaultBundles {
		k = 1
	}
	admK := adminOf(t, r, k)
	nsn, _ := utils.GetNamespaceName(ns)
	if err := admK.Namespaces().ClearNamespaceBacklogForSubscriptionWithContext(ctx, *nsn, "hold"); err != nil {
		t.Fatalf("clear backlog through broker %d: %v", k, err)
	}
	for _, n := range names {
		tn, _ := utils.GetTopicName(n)
		st, err := admK.Topics().GetStats(*tn)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Subscriptions["hold"].MsgBacklog; got != 0 {
			t.Fatalf("backlog of %s hold after the clear: %d", n, got)
		}
	}
	if err := admK.Namespaces().UnsubscribeNamespaceWithContext(ctx, *nsn, "hold"); err != nil {
		t.Fatalf("unsubscribe through broker %d: %v", k, err)
	}
	for _, n := range names {
		tn, _ := utils.GetTopicName(n)
		subs, err := admK.Subscriptions().List(*tn)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(subs, "hold") {
			t.Fatalf("%s still has hold: %v", n, subs)
		}
	}
}

// TestAntiAffinityPlacement: a namespace of an anti-affinity group is
// placed on a broker that owns no namespace of the group, even when that
// broker owns more bundles than the other.
func TestAntiAffinityPlacement(t *testing.T) {
	r, c := twoBrokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	one := &policy.BundlesData{NumBundles: 1}
	place := func(ns string) int {
		t.Helper()
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://" + ns + "/t"})
		if err != nil {
			t.Fatal(err)
		}
		p.Close()
		for i := range r.Brokers() {
			for _, ob := range r.Owned(i) {
				if ob.Namespace == ns {
					return i
				}
			}
		}
		t.Fatalf("no broker owns %s", ns)
		return -1
	}
	if err := r.Policies().CreateNamespace(ctx, "public/g1", &policy.Policies{Bundles: one, AntiAffinityGroup: "g"}); err != nil {
		t.Fatal(err)
	}
	x := place("public/g1")
	y := 1 - x
	// Fill until the other broker owns more bundles than x: placement by
	// load alone would then choose x.
	for i := 0; len(r.Owned(y)) <= len(r.Owned(x)); i++ {
		if i == 40 {
			t.Fatalf("broker %d owns %d bundles, broker %d %d, after 40 namespaces", x, len(r.Owned(x)), y, len(r.Owned(y)))
		}
		ns := fmt.Sprintf("public/filler%d", i)
		if err := r.Policies().CreateNamespace(ctx, ns, &policy.Policies{Bundles: one}); err != nil {
			t.Fatal(err)
		}
		place(ns)
	}
	if err := r.Policies().CreateNamespace(ctx, "public/g2", &policy.Policies{Bundles: one, AntiAffinityGroup: "g"}); err != nil {
		t.Fatal(err)
	}
	lx, ly := len(r.Owned(x)), len(r.Owned(y))
	if got := place("public/g2"); got != y {
		t.Fatalf("g2 placed on broker %d, which owns g1; the other (%d bundles against %d) owns no namespace of the group", got, ly, lx)
	}
}

// TestInactiveTopicDeletedByTheMaintenanceLoop: with a short
// broker.maintenanceInterval, the broker's own maintenance loop deletes a
// topic its namespace's inactive topic policy lets go, and keeps one
// that has a subscription.
func TestInactiveTopicDeletedByTheMaintenanceLoop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := region.Config{Name: "idle", DataDir: t.TempDir()}
	cfg.Broker.MaintenanceInterval = 200 * time.Millisecond
	r, err := region.Start(ctx, cfg, region.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(context.Background())
	const ns = "public/idle"
	if err := r.Policies().CreateNamespace(ctx, ns, &policy.Policies{InactiveTopicPolicies: &policy.InactiveTopicPolicies{
		InactiveTopicDeleteMode: policy.DeleteWhenNoSubscriptions, MaxInactiveDurationSeconds: 1, DeleteWhileInactive: true}}); err != nil {
		t.Fatal(err)
	}
	adm := adminOf(t, r, 0)
	gone, _ := utils.GetTopicName("persistent://" + ns + "/gone")
	kept, _ := utils.GetTopicName("persistent://" + ns + "/kept")
	for _, tn := range []*utils.TopicName{gone, kept} {
		if err := adm.Topics().Create(*tn, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := adm.Subscriptions().Create(*kept, "s", utils.Latest); err != nil {
		t.Fatal(err)
	}
	nsn, _ := utils.GetNamespaceName(ns)
	waitFor(t, time.Minute, "the unused topic deleted", func() bool {
		_, names, err := adm.Topics().List(*nsn)
		return err == nil && slices.Contains(names, kept.String()) && !slices.Contains(names, gone.String())
	})
}

// TestTopicAdminRedirectIsAuthoritative sends topic admin requests for
// topics whose bundle nobody owns to one broker of two. The broker that
// places a bundle on the other redirects with authoritative=true, and the
// broker named by such a request takes the bundle rather than placing it
// again by its own view of the load: two brokers whose load views differ
// cannot send a request back and forth ("stopped after 10 redirects").
func TestTopicAdminRedirectIsAuthoritative(t *testing.T) {
	r, _ := twoBrokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "public/auth"
	if err := r.Policies().CreateNamespace(ctx, ns, nil); err != nil {
		t.Fatal(err)
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	put := func(u string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	web := []string{strings.TrimRight(r.Brokers()[0].WebServiceURL, "/"), strings.TrimRight(r.Brokers()[1].WebServiceURL, "/")}
	// Topics of bundles nobody owns go to the brokers in turn until two
	// were placed on the other broker (a broker may place bundles on
	// itself until it sees the other's load report).
	bundles := topic.Bundles(topic.DefaultBundles)
	redirected := 0
	deadline := time.Now().Add(time.Minute)
	for i := 0; redirected < 2; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 2 redirects seen in a minute: the brokers placed every bundle on themselves", redirected)
		}
		nsi := fmt.Sprintf("%s-%d", ns, i/topic.DefaultBundles)
		if i%topic.DefaultBundles == 0 {
			if err := r.Policies().CreateNamespace(ctx, nsi, nil); err != nil {
				t.Fatal(err)
			}
		}
		path := fmt.Sprintf("/admin/v2/persistent/%s/t%d", nsi, i)
		name, err := topic.Parse(fmt.Sprintf("persistent://%s/t%d", nsi, i))
		if err != nil {
			t.Fatal(err)
		}
		bundle := topic.BundleFor(name, bundles)
		if ownerOf(r, nsi, bundle) >= 0 {
			continue // placed by an earlier topic of the same bundle
		}
		from := i % 2
		resp := put(web[from] + path)
		if resp.StatusCode == http.StatusNoContent {
			continue // the broker placed it on itself
		}
		if resp.StatusCode != http.StatusTemporaryRedirect {
			t.Fatalf("PUT %s on broker %d: %s", path, from, resp.Status)
		}
		loc, err := url.Parse(resp.Header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		if got := loc.Scheme + "://" + loc.Host; got != web[1-from] || loc.Path != path || loc.Query().Get("authoritative") != "true" {
			t.Fatalf("redirect of PUT %s: Location %s, want %s%s?authoritative=true", path, loc, web[1-from], path)
		}
		if o := ownerOf(r, nsi, bundle); o >= 0 {
			t.Fatalf("bundle %s owned by broker %d after a redirect: the redirecting broker placed it, nobody took it yet", bundle, o)
		}
		// Sent with authoritative=true to the broker that would itself
		// place the bundle on the other: it takes the bundle.
		if resp := put(web[from] + path + "?authoritative=true"); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("authoritative PUT %s on broker %d: %s", path, from, resp.Status)
		}
		if o := ownerOf(r, nsi, bundle); o != from {
			t.Fatalf("bundle %s owned by broker %d after an authoritative request to broker %d", bundle, o, from)
		}
		redirected++
	}
	if resp := put(web[0] + fmt.Sprintf("/admin/v2/persistent/%s/bad?authoritative=maybe", ns)); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("authoritative=maybe: %s, want 400", resp.Status)
	}
}

// TestStopReleasesEveryBundle: a broker's stop gives up every bundle it
// owns before it goes (each bundle's loaded topics closed, then its
// ownership released, in one pass over the loaded topics), so its
// topics are served at once by the region's other broker, with nothing
// lost, instead of after its lease expires.
func TestStopReleasesEveryBundle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := region.Start(ctx, region.Config{Name: "two", DataDir: t.TempDir(), Brokers: 2}, region.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(context.Background()) })
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: r.Brokers()[1].ServiceURL, OperationTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	name := func(i int) string { return fmt.Sprintf("persistent://public/default/own-%d", i) }
	send := func(i int, payload string) {
		t.Helper()
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: name(i), DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(payload)}); err != nil {
			t.Fatalf("topic %d: %v", i, err)
		}
	}
	// Loaded topics with no client attached, until broker 0 has some.
	topics := 0
	for ; topics < 8 || len(r.Broker(0).Topics()) == 0; topics++ {
		if topics == 64 {
			t.Fatalf("broker 0 loaded none of %d topics", topics)
		}
		send(topics, "before")
	}
	owned, loaded := len(r.Owned(0)), len(r.Broker(0).Topics())
	if err := r.StopBroker(ctx, 0); err != nil {
		t.Fatal(err)
	}
	// Released by the stop, not left to expire with its lease.
	if n := len(r.Owned(0)); n != 0 {
		t.Fatalf("%d bundles still recorded as broker 0's after its stop (of %d)", n, owned)
	}
	t.Logf("broker 0 stopped with %d bundles and %d of %d topics loaded", owned, loaded, topics)
	for i := range topics {
		send(i, "after")
	}
	for i := range topics {
		rd, err := c.CreateReader(pulsar.ReaderOptions{Topic: name(i), StartMessageID: pulsar.EarliestMessageID()})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for len(got) < 2 {
			m, err := rd.Next(ctx)
			if err != nil {
				t.Fatalf("topic %d after %v: %v", i, got, err)
			}
			got = append(got, string(m.Payload()))
		}
		rd.Close()
		if got[0] != "before" || got[1] != "after" {
			t.Fatalf("topic %d: %v, want [before after]", i, got)
		}
	}
}
