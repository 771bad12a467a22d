package broker_test

import (
	"encoding/binary"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

// BenchmarkIdleConnections measures what 1000 connections cost a broker
// that holds them: half are idle after their CONNECT, half are half-open
// (a frame announced and never finished, no CONNECT). It reports the
// broker's heap and goroutine stacks per connection, after a GC; the
// bound is in docs/BENCHMARKS.md.
//
//	go test -run '^$' -bench BenchmarkIdleConnections -benchtime 1x ./broker/
func BenchmarkIdleConnections(b *testing.B) {
	const n = 1000
	e := startEnv(b, func(c *setup) { c.Limits.HandshakeTimeout = time.Hour })
	for range b.N {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		var conns []net.Conn
		for i := range n {
			if i%2 == 0 {
				c, err := tryDialConnected(e.url)
				if err != nil {
					b.Fatal(err)
				}
				conns = append(conns, c)
				continue
			}
			c, err := net.Dial("tcp", strings.TrimPrefix(e.url, "pulsar://"))
			if err != nil {
				b.Fatal(err)
			}
			var hdr [12]byte // announces a 60 KiB frame, sends 8 bytes of it
			binary.BigEndian.PutUint32(hdr[:4], 60<<10)
			c.Write(hdr[:])
			conns = append(conns, c)
		}
		time.Sleep(500 * time.Millisecond) // let the broker read what was sent
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		heap := float64(after.HeapInuse) - float64(before.HeapInuse)
		stacks := float64(after.StackInuse) - float64(before.StackInuse)
		b.ReportMetric(heap/n, "heap-B/conn")
		b.ReportMetric(stacks/n, "stack-B/conn")
		b.ReportMetric((heap+stacks)/n, "B/conn")
		for _, c := range conns {
			c.Close()
		}
	}
}
