package globalconfig

import (
	"io"
	"net"
	"sync"
	"testing"
)

// proxy is a TCP proxy in front of etcd that a test can cut (existing
// connections are closed, new ones are held) and heal (held connections
// proceed), to partition one client from the store while others write.
type proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	cut     bool
	closed  bool
	conns   map[net.Conn]struct{}
	pending []net.Conn

	wg sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) endpoint() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		switch {
		case p.closed:
			c.Close()
		case p.cut:
			p.pending = append(p.pending, c)
		default:
			p.pipeLocked(c)
		}
		p.mu.Unlock()
	}
}

func (p *proxy) pipeLocked(c net.Conn) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			return
		}
		p.mu.Lock()
		if p.cut || p.closed {
			p.mu.Unlock()
			c.Close()
			u.Close()
			return
		}
		p.conns[c], p.conns[u] = struct{}{}, struct{}{}
		p.mu.Unlock()
		var cw sync.WaitGroup
		cw.Add(2)
		cp := func(dst, src net.Conn) {
			defer cw.Done()
			io.Copy(dst, src)
			dst.Close()
			src.Close()
		}
		go cp(u, c)
		go cp(c, u)
		cw.Wait()
		p.mu.Lock()
		delete(p.conns, c)
		delete(p.conns, u)
		p.mu.Unlock()
	}()
}

// Cut closes every proxied connection and holds new ones.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Heal lets held and new connections through.
func (p *proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	for _, c := range p.pending {
		p.pipeLocked(c)
	}
	p.pending = nil
}

func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	for _, c := range p.pending {
		c.Close()
	}
	p.pending = nil
	p.mu.Unlock()
	p.wg.Wait()
}
