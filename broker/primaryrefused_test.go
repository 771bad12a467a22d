package broker_test

import (
	"context"
	"io"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/broker/primary"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/observability"
	"github.com/isobar-mq/isobar/wire/pb"
)

// TestPrimaryRefusalsCounted: a producer of an active-standby namespace
// whose primary is another region is refused at this region's broker,
// and the refusal is counted (broker.MetricPrimaryRefused, by operation)
// where an operator sees it.
func TestPrimaryRefusalsCounted(t *testing.T) {
	tel, err := observability.New(context.Background(), observability.Config{Region: "test", Component: "broker", Instance: "b0"})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	e := startEnv(t, func(s *setup) { s.MeterProvider = tel.MeterProvider() })
	e.b.Shutdown(ctxT(t))
	gates, err := primary.New(primary.Config{Region: "test", Broker: "a"}, primary.Deps{Global: e.cl.Connect()})
	if err != nil {
		t.Fatal(err)
	}
	gates.Start()
	t.Cleanup(gates.Abort)
	e.modify = func(s *setup) {
		s.MeterProvider = tel.MeterProvider()
		s.Primary = gates
	}
	e.startBroker()
	ctx := ctxT(t)
	const ns, tp = "public/as", "persistent://public/as/refused"
	activeStandby(t, e, ns)
	if _, err := e.pol.UpdateNamespace(ctx, ns, func(p *policy.Policies) error {
		return policy.SetFailover(p, policy.ActiveStandby, "other")
	}); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, 30*time.Second, func() bool { return gates.Check(ns, "") != nil })

	c := dialRaw(t, e.url, true)
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
		Topic: proto.String(tp), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1), ProducerName: proto.String("app")}})
	if r := c.recv().Cmd; r.GetType() != pb.BaseCommand_ERROR || r.GetError().GetError() != pb.ServerError_ServiceNotReady {
		t.Fatalf("producer at the standby: %v, want a ServiceNotReady error", r)
	}

	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	page, _ := io.ReadAll(rec.Body)
	name := strings.ReplaceAll(broker.MetricPrimaryRefused, ".", "_") + "_total"
	re := regexp.MustCompile(`(?m)^` + name + `\{[^}]*isobar_operation="producer"[^}]*\} (\S+)$`)
	m := re.FindSubmatch(page)
	if m == nil {
		t.Fatalf("no %s series for operation producer in:\n%s", name, grepLines(string(page), name))
	}
	if v, err := strconv.ParseFloat(string(m[1]), 64); err != nil || v < 1 {
		t.Fatalf("%s{operation=producer} = %s, want ≥ 1", name, m[1])
	}
}

// grepLines is the lines of s containing sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
