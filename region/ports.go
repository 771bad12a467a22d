package region

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// The port plan of `isobar dev` and `isobar region`: region i of a
// federation owns the block base+100*i .. base+100*i+99, and its brokers'
// HTTP ports sit at base+1430+100*i+j, so the default base 6650 gives
// region 0 Pulsar's familiar 6650 and 8080. The global configuration
// store lives in region 0's block. Brokers that serve TLS take their
// Pulsar TLS port at base+1443+100*i+j and their HTTPS port at
// base+1793+100*i+j (8093 and Pulsar's 8443 for region 0 of base 6650:
// 6651 is broker 1's port in the plan). A federation of N `isobar region`
// processes with the same base and their indexes is wired exactly like
// `isobar dev`.
const (
	PortStride     = 100  // ports per region
	brokerShift    = 0    // broker j's Pulsar port: +j (j < 10)
	globalShift    = 10   // global store client (+11 peer), region 0's block
	natsShift      = 20   // NATS client; +21 gateway, +22 cluster routes
	metastoreShift = 30   // etcd client; +31 peer
	bookieShift    = 40   // bookie j: +40+j (j < 60)
	httpShift      = 1430 // broker j's HTTP port: base+1430+100*i+j
	tlsShift       = 1443 // broker j's Pulsar TLS port: base+1443+100*i+j
	httpsShift     = 1793 // broker j's HTTPS port: base+1793+100*i+j
	// MaxBrokers and MaxBookies are how many of each fit in a block.
	MaxBrokers = globalShift - brokerShift
	MaxBookies = PortStride - bookieShift
)

// Ports are one region's ports in the plan.
type Ports struct {
	Broker        int // broker j at Broker+j
	HTTP          int // broker j at HTTP+j
	BrokerTLS     int // broker j at BrokerTLS+j
	HTTPS         int // broker j at HTTPS+j
	NATS          int
	NATSGateway   int
	NATSCluster   int
	Metastore     int
	MetastorePeer int
	Bookie        int // bookie j at Bookie+j
}

// PlanPorts returns region index's ports for base.
func PlanPorts(base, index int) Ports {
	block := base + PortStride*index
	return Ports{
		Broker:        block + brokerShift,
		HTTP:          base + httpShift + PortStride*index,
		BrokerTLS:     base + tlsShift + PortStride*index,
		HTTPS:         base + httpsShift + PortStride*index,
		NATS:          block + natsShift,
		NATSGateway:   block + natsShift + 1,
		NATSCluster:   block + natsShift + 2,
		Metastore:     block + metastoreShift,
		MetastorePeer: block + metastoreShift + 1,
		Bookie:        block + bookieShift,
	}
}

// GlobalPorts are the global configuration store's client and peer ports
// for base.
func GlobalPorts(base int) (client, peer int) {
	return base + globalShift, base + globalShift + 1
}

// MaxRegions is how many regions the plan lays out before a region's
// block would reach region 0's HTTP ports.
const MaxRegions = httpShift / PortStride

// CheckPlan reports whether regions regions fit the plan at base.
func CheckPlan(base, regions int) error {
	if regions > MaxRegions {
		return fmt.Errorf("the port plan holds at most %d regions, not %d", MaxRegions, regions)
	}
	if base < 1024 || base+httpsShift+MaxBrokers+PortStride*regions > 65535 {
		return fmt.Errorf("base port %d leaves no room for %d regions of %d ports", base, regions, PortStride)
	}
	return nil
}

// PlannedPorts lists the ports a federation of regions regions laid out
// from base takes, with bookies bookies and brokers brokers per region,
// their TLS and HTTPS ports when tls is set, and the global
// configuration store's (`isobar dev`'s federation).
func PlannedPorts(base, regions, bookies, brokers int, tls bool) []int {
	client, peer := GlobalPorts(base)
	out := []int{client, peer}
	for i := range regions {
		p := PlanPorts(base, i)
		out = append(out, p.NATS, p.NATSGateway, p.Metastore, p.MetastorePeer)
		for j := range brokers {
			out = append(out, p.Broker+j, p.HTTP+j)
			if tls {
				out = append(out, p.BrokerTLS+j, p.HTTPS+j)
			}
		}
		for j := range bookies {
			out = append(out, p.Bookie+j)
		}
	}
	return out
}

// PortsInUse returns those of ports that cannot be listened on at host
// now (something else holds them), in the order given: a check before
// anything starts, so that a taken port is reported at once rather than
// by the part that meets it after the others started.
func PortsInUse(host string, ports []int) []int {
	var busy []int
	for _, p := range ports {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			busy = append(busy, p)
			continue
		}
		ln.Close()
	}
	return busy
}

// freePort returns a port nothing listens on now, for a region started
// without a port plan (tests). It is taken below the kernel's ephemeral
// range (Linux: 32768-60999), whose ports any process's outgoing
// connection may take as its source port between this check and the
// component's bind, and is never handed out twice by this process.
func freePort(host string) (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		p := freePortLow + rand.IntN(freePortHigh-freePortLow)
		if portsGiven[p] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			continue
		}
		ln.Close()
		portsGiven[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free port on %s in %d..%d", host, freePortLow, freePortHigh-1)
}

// The ports freePort hands out, under the ephemeral range and apart from
// the multi-process tests' (internal/proctest: 20000-31999) and the
// default port plan's (6650 and up).
const (
	freePortLow  = 10000
	freePortHigh = 20000
)

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)
