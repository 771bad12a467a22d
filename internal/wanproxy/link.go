package wanproxy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// State is the fault state of a [Link].
type State int

const (
	// StateUp forwards traffic normally (with latency, bandwidth and loss
	// applied).
	StateUp State = iota
	// StateCut resets every open connection and closes every new one at
	// once: a partition that both sides see.
	StateCut
	// StateBlackhole moves no byte in either direction and closes nothing:
	// a partition that peers only notice through their own timeouts.
	StateBlackhole
)

// String returns "up", "cut" or "blackhole".
func (s State) String() string {
	switch s {
	case StateUp:
		return "up"
	case StateCut:
		return "cut"
	case StateBlackhole:
		return "blackhole"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Stats counts what a [Link] has done since [Listen].
type Stats struct {
	// ToTarget is the number of bytes written to the target, that is,
	// forwarded from clients to the target.
	ToTarget int64
	// ToClient is the number of bytes written back to clients.
	ToClient int64
	// Accepted is the number of connections accepted, including those
	// closed at once because the link was cut.
	Accepted int64
	// Open is the number of connections currently proxied, including
	// those held by a black hole before being dialled upstream.
	Open int64
}

// Directions of a connection; they index per-direction state.
const (
	toTarget = 0 // client → target
	toClient = 1 // target → client
)

const (
	chunkSize     = 32 << 10 // largest chunk read at once
	maxQueueBytes = 4 << 20  // bytes in flight per direction per connection
	maxQueueItems = 1024     // chunks in flight per direction per connection
	minRetransmit = 200 * time.Millisecond
	dialTimeout   = 10 * time.Second
)

// Link is one proxied TCP link: it listens on a local address and forwards
// every accepted connection to a target address, applying latency,
// bandwidth, loss and the fault state (see the package documentation).
// Settings can be changed at any time and apply to existing and new
// connections. All methods are safe for concurrent use.
type Link struct {
	ln     net.Listener
	target string
	quit   chan struct{} // closed by Close
	wg     sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	state     State
	latency   time.Duration
	bandwidth int64 // bytes per second per direction; 0 = unlimited
	bwGen     uint64
	loss      float64
	changed   chan struct{} // closed and replaced on every change of the above
	next      [2]time.Time  // per direction: when the link is free to send again
	conns     map[*conn]struct{}
	forwarded [2]int64
	accepted  int64
}

// Listen listens on addr (for example "127.0.0.1:0") and forwards every
// accepted connection to target, which is dialled once per accepted
// connection. The link starts up, with no latency, unlimited bandwidth and
// no loss.
func Listen(addr, target string) (*Link, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	l := &Link{
		ln:      ln,
		target:  target,
		quit:    make(chan struct{}),
		changed: make(chan struct{}),
		conns:   map[*conn]struct{}{},
	}
	l.wg.Add(1)
	go l.serve()
	return l, nil
}

// Addr returns the address the link listens on, as host:port.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// Target returns the address the link forwards to.
func (l *Link) Target() string { return l.target }

// Close stops listening and resets every connection. It returns once every
// goroutine of the link has ended. Later calls return nil.
func (l *Link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.quit)
	l.notifyLocked()
	l.mu.Unlock()
	err := l.ln.Close()
	l.resetAll()
	l.wg.Wait()
	return err
}

// SetLatency sets the one-way delay added in each direction. Negative
// values count as zero. It also applies to bytes already queued.
func (l *Link) SetLatency(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.latency = max(d, 0)
	l.notifyLocked()
}

// SetBandwidth limits each direction of the link, all connections together,
// to bytesPerSecond. Zero or a negative value means unlimited.
func (l *Link) SetBandwidth(bytesPerSecond int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.bandwidth = max(bytesPerSecond, 0)
	l.bwGen++
	l.next = [2]time.Time{}
	l.notifyLocked()
}

// SetLoss sets the probability, clamped to [0, 1], that a forwarded chunk
// is "lost": held back for a retransmission delay of max(200 ms,
// 3 × latency), with the later chunks of its direction waiting behind it.
// It applies to chunks read from now on.
func (l *Link) SetLoss(p float64) {
	if p != p { // NaN
		p = 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loss = min(max(p, 0), 1)
	l.notifyLocked()
}

// Up returns the link to normal forwarding. Connections held by a black
// hole are kept: their queued bytes are delivered in order, and held new
// connections are dialled upstream.
func (l *Link) Up() { l.setState(StateUp) }

// Cut partitions the link so that both sides notice: every open connection
// is reset (RST) on both ends, and new connections are accepted and closed
// at once, so that the client's dial succeeds and its first read sees EOF,
// until [Link.Up] or [Link.Blackhole].
func (l *Link) Cut() {
	l.setState(StateCut)
	l.resetAll()
}

// Blackhole makes packets vanish: open connections stay open but no byte
// moves in either direction, and new connections are accepted but neither
// dialled upstream nor sent anything. Nothing is closed.
func (l *Link) Blackhole() { l.setState(StateBlackhole) }

// State returns the current fault state.
func (l *Link) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

// Stats returns the link's counters.
func (l *Link) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{
		ToTarget: l.forwarded[toTarget],
		ToClient: l.forwarded[toClient],
		Accepted: l.accepted,
		Open:     int64(len(l.conns)),
	}
}

func (l *Link) setState(s State) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state = s
	l.notifyLocked()
}

// notifyLocked wakes every goroutine waiting for a change of settings.
func (l *Link) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// resetAll resets every open connection.
func (l *Link) resetAll() {
	l.mu.Lock()
	conns := make([]*conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		c.teardown(true)
	}
}

// view is a snapshot of the settings a goroutine waits on.
type view struct {
	state   State
	latency time.Duration
	bwGen   uint64
	changed <-chan struct{}
}

func (l *Link) view() view {
	l.mu.Lock()
	defer l.mu.Unlock()
	return view{state: l.state, latency: l.latency, bwGen: l.bwGen, changed: l.changed}
}

// lossDelay draws whether a chunk read now is lost and returns the extra
// delay it gets.
func (l *Link) lossDelay() time.Duration {
	l.mu.Lock()
	p, lat := l.loss, l.latency
	l.mu.Unlock()
	if p <= 0 || rand.Float64() >= p {
		return 0
	}
	return max(minRetransmit, 3*lat)
}

// reserve books the sending of up to n bytes in direction dir. It returns
// how many bytes may be sent, the time they may be written at (zero when
// bandwidth is unlimited) and the bandwidth generation the booking belongs
// to.
func (l *Link) reserve(dir, n int) (int, time.Time, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	bw := l.bandwidth
	if bw <= 0 {
		return n, time.Time{}, l.bwGen
	}
	// Pieces of about 20 ms of transmission keep pacing smooth.
	piece := int(min(int64(n), max(bw/50, 1)))
	start := time.Now()
	if l.next[dir].After(start) {
		start = l.next[dir]
	}
	end := start.Add(time.Duration(int64(piece) * int64(time.Second) / bw))
	l.next[dir] = end
	return piece, end, l.bwGen
}

func (l *Link) addForwarded(dir, n int) {
	l.mu.Lock()
	l.forwarded[dir] += int64(n)
	l.mu.Unlock()
}

// serve accepts connections until the listener is closed.
func (l *Link) serve() {
	defer l.wg.Done()
	var backoff time.Duration
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Transient (for example out of file descriptors): retry
			// with a growing pause, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-l.quit:
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		l.mu.Lock()
		l.accepted++
		if l.closed || l.state == StateCut {
			l.mu.Unlock()
			// An orderly close, not a reset: a reset can reach the
			// client before its connect() returns and make the dial
			// itself fail, while a cut link accepts, then ends.
			nc.Close()
			continue
		}
		c := newConn(l, nc)
		l.conns[c] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go c.run()
	}
}
