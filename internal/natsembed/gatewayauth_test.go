package natsembed

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/internal/wanproxy"
)

// TestGatewaysWithCredentialsOfTheirOwnUseOnlyTheirOwnURLs runs three
// regions whose gateways reach each other only through a proxy per pair
// (from -> to), as a federation behind an emulated WAN does. NATS gossips
// every gateway URL it knows, so each region also learns the other
// regions' proxies to the same destination, and used to reconnect
// through them at random: a fault on one region's links then stalled
// another pair's traffic (a drill's black hole of us-east stopped
// eu-west -> ap-south for 37 s). With a pair of credentials per region,
// a gossiped URL carries none and is refused, so after any number of
// reconnections every outbound gateway runs through its own proxy.
func TestGatewaysWithCredentialsOfTheirOwnUseOnlyTheirOwnURLs(t *testing.T) {
	regions := []string{"a", "b", "c"}
	const secret = "s3cret"
	gwPort := map[string]int{}
	for _, r := range regions {
		gwPort[r] = freePort(t)
	}
	links := map[[2]string]*wanproxy.Link{}
	for _, from := range regions {
		for _, to := range regions {
			if from == to {
				continue
			}
			l, err := wanproxy.Listen("127.0.0.1:0", net.JoinHostPort("127.0.0.1", strconv.Itoa(gwPort[to])))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			links[[2]string{from, to}] = l
		}
	}
	servers := map[string]*Server{}
	for _, r := range regions {
		gws := map[string]string{}
		for _, to := range regions {
			if to != r {
				u := url.URL{Scheme: "nats", User: url.UserPassword(to, secret), Host: links[[2]string{r, to}].Addr()}
				gws[to] = u.String()
			}
		}
		servers[r] = start(t, Config{Region: r, GatewayPort: gwPort[r], Gateways: gws, GatewayUser: r, GatewayPassword: secret})
	}
	all := []*Server{servers["a"], servers["b"], servers["c"]}

	// check waits for the full mesh and then requires every outbound
	// gateway to run through its own proxy.
	check := func(round string) {
		t.Helper()
		waitMesh(t, all...)
		for _, from := range regions {
			gz, err := servers[from].ns.Gatewayz(nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, to := range regions {
				if to == from {
					continue
				}
				og := gz.OutboundGateways[to]
				if og == nil || og.Connection == nil {
					t.Fatalf("%s: %s has no outbound gateway to %s", round, from, to)
				}
				got := net.JoinHostPort(og.Connection.IP, strconv.Itoa(og.Connection.Port))
				if want := links[[2]string{from, to}].Addr(); got != want {
					t.Fatalf("%s: %s reaches %s through %s, not its own link %s", round, from, to, got, want)
				}
			}
		}
	}
	check("start")

	// Gossip did hand out the other regions' proxies: b knows a's way to c.
	vz, err := servers["b"].ns.Varz(nil)
	if err != nil {
		t.Fatal(err)
	}
	var bToC []string
	for _, g := range vz.Gateway.Gateways {
		if g.Name == "c" {
			bToC = g.URLs
		}
	}
	if !slices.ContainsFunc(bToC, func(u string) bool { return strings.Contains(u, links[[2]string{"a", "c"}].Addr()) }) {
		t.Fatalf("b's URLs for c %v lack a's link %s: gossip did not happen, the test proves nothing", bToC, links[[2]string{"a", "c"}].Addr())
	}

	// Reconnections pick among all known URLs at random: cut each
	// region's links in turn, a few times over.
	for round := range 4 {
		victim := regions[round%len(regions)]
		var touched []*wanproxy.Link
		for k, l := range links {
			if k[0] == victim || k[1] == victim {
				touched = append(touched, l)
			}
		}
		for _, l := range touched {
			l.Cut()
		}
		waitFor(t, 10*time.Second, func() error {
			if n := servers[victim].NumGateways(); n != 0 {
				return fmt.Errorf("%s still has %d gateway connections", victim, n)
			}
			return nil
		})
		for _, l := range touched {
			l.Up()
		}
		check(fmt.Sprintf("round %d (%s cut and healed)", round, victim))
	}
}
