package region

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"time"

	"github.com/isobar-mq/isobar/internal/wanproxy"
)

// WANConfig makes a federation's links between regions run through an
// emulated wide-area network (package wanproxy): every region's NATS
// gateway connection to every other region, and every region's connection
// to the global configuration store, go through a link of their own, so
// tests and drills can add latency and cut or black-hole one region.
type WANConfig struct {
	// Latency is the one-way delay of every link (0: none; change it
	// later with WAN.SetLatency).
	Latency time.Duration
}

// GlobalStore names the global configuration store as a WAN endpoint.
const GlobalStore = "global"

// unadvertised is the gateway address a region behind the WAN advertises:
// nothing listens there. NATS adds the gateway URLs a remote advertises to
// the ones configured for it; a real address would let a reconnecting
// gateway bypass its link, while this one is refused at once and the
// configured link is used.
const unadvertised = "127.0.0.1:1"

// WAN is a running federation's emulated network. Its links are named by
// (from, to): region to region (the from region's gateway connection to
// the to region) and region to GlobalStore.
type WAN struct {
	links map[[2]string]*wanproxy.Link
}

func newWAN() *WAN { return &WAN{links: map[[2]string]*wanproxy.Link{}} }

// add starts the link from -> to, forwarding to target, and returns its
// address.
func (w *WAN) add(host, from, to, target string, latency time.Duration) (string, error) {
	l, err := wanproxy.Listen(net.JoinHostPort(host, "0"), target)
	if err != nil {
		return "", fmt.Errorf("wan link %s -> %s: %w", from, to, err)
	}
	l.SetLatency(latency)
	w.links[[2]string{from, to}] = l
	return l.Addr(), nil
}

// Link returns the link from -> to (nil when there is none).
func (w *WAN) Link(from, to string) *wanproxy.Link {
	if w == nil {
		return nil
	}
	return w.links[[2]string{from, to}]
}

// Links lists the links as "from->to", in order.
func (w *WAN) Links() []string {
	var out []string
	for k := range w.links {
		out = append(out, k[0]+"->"+k[1])
	}
	sort.Strings(out)
	return out
}

// SetLatency sets every link's one-way delay.
func (w *WAN) SetLatency(d time.Duration) {
	for _, l := range w.links {
		l.SetLatency(d)
	}
}

// touching returns the links into and out of region (the global store's
// included).
func (w *WAN) touching(region string) ([]*wanproxy.Link, error) {
	var out []*wanproxy.Link
	for k, l := range w.links {
		if k[0] == region || k[1] == region {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("wan: no links of region %q", region)
	}
	return out, nil
}

// Partition cuts every link into and out of region: both sides see their
// connections reset and new ones closed, as in a network partition. The
// region keeps serving its own clients.
func (w *WAN) Partition(region string) error {
	ls, err := w.touching(region)
	for _, l := range ls {
		l.Cut()
	}
	return err
}

// Blackhole makes every link into and out of region drop everything
// silently: connections stay open and nothing moves, so peers notice only
// through their own timeouts.
func (w *WAN) Blackhole(region string) error {
	ls, err := w.touching(region)
	for _, l := range ls {
		l.Blackhole()
	}
	return err
}

// Heal brings every link into and out of region back up.
func (w *WAN) Heal(region string) error {
	ls, err := w.touching(region)
	for _, l := range ls {
		l.Up()
	}
	return err
}

func (w *WAN) close() error {
	if w == nil {
		return nil
	}
	var errs []error
	for _, l := range w.links {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}
