package bookie

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/proto"
)

// FuzzServeConn feeds arbitrary bytes to a live bookie connection (over
// net.Pipe): whatever arrives, the bookie must not panic or hang, and it
// must keep serving other connections.
func FuzzServeConn(f *testing.F) {
	f.Add(proto.AppendRequest(nil, &proto.Request{Op: proto.OpAdd, ID: 1, Ledger: 1, Entry: 0, Payload: entry(1, 0, -1, "x")}))
	f.Add(proto.AppendRequest(nil, &proto.Request{Op: proto.OpReadLAC, ID: 2, Ledger: 1, PrevLAC: 5, Timeout: 10}))
	f.Add(proto.AppendRequest(nil, &proto.Request{Op: proto.OpFence, ID: 3, Ledger: 2}))
	f.Add([]byte{0, 0, 0, 12, 1, 99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	cfg := testConfig(nil, f.TempDir())
	s, err := New(cfg, Deps{})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	f.Fuzz(func(t *testing.T, b []byte) {
		client, server := pipe()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.ServeConn(ctx, server)
		go io.Copy(io.Discard, client)
		client.SetWriteDeadline(time.Now().Add(2 * time.Second))
		client.Write(b)
		client.Close()
	})
}
