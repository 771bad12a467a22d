package bookie_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie"
	"github.com/isobar-mq/isobar/bookie/proto"
	"github.com/isobar-mq/isobar/internal/proctest"
	"github.com/isobar-mq/isobar/metastore"
)

// The test binary doubles as a bookie process: with ISOBAR_TEST_BOOKIE_CHILD
// set it runs a bookie from the JSON config in that variable, prints READY
// and serves until killed. Tests kill it with SIGKILL.
func TestMain(m *testing.M) {
	if raw := os.Getenv("ISOBAR_TEST_BOOKIE_CHILD"); raw != "" {
		os.Exit(runChildBookie(raw))
	}
	os.Exit(m.Run())
}

type childConfig struct {
	Bookie    bookie.Config
	Endpoints []string
}

func runChildBookie(raw string) int {
	var cc childConfig
	if err := json.Unmarshal([]byte(raw), &cc); err != nil {
		fmt.Fprintln(os.Stderr, "child bookie config:", err)
		return 2
	}
	ctx := context.Background()
	var meta metastore.Meta
	if len(cc.Endpoints) > 0 {
		m, err := metastore.Connect(ctx, metastore.Config{Endpoints: cc.Endpoints})
		if err != nil {
			fmt.Fprintln(os.Stderr, "child bookie:", err)
			return 1
		}
		meta = m
	}
	srv, err := bookie.New(cc.Bookie, bookie.Deps{Meta: meta})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child bookie:", err)
		return 1
	}
	if err := srv.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child bookie:", err)
		return 1
	}
	fmt.Println("READY", srv.Addr())
	select {}
}

// childBookie is a bookie in its own process.
type childBookie struct {
	t   *testing.T
	cfg childConfig
	cmd *exec.Cmd
}

func startChild(t *testing.T, cc childConfig) *childBookie {
	t.Helper()
	raw, _ := json.Marshal(cc)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ISOBAR_TEST_BOOKIE_CHILD="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &childBookie{t: t, cfg: cc, cmd: cmd}
	t.Cleanup(c.kill)
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "READY") {
				ready <- sc.Text()
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		t.Fatal("child bookie not ready within 60s")
	}
	return c
}

// kill sends SIGKILL and reaps the process.
func (c *childBookie) kill() {
	if c.cmd.ProcessState != nil {
		return
	}
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

// freePort is a loopback address with a port below the kernel's
// ephemeral range (see proctest.FreePort).
func freePort(t *testing.T) string { return proctest.Addr(proctest.FreePort(t)) }

// TestSIGKILLLosesNoAckedEntry kills a bookie process with SIGKILL in the
// middle of a pipelined write load, several times, with frequent flushes so
// some kills land inside a checkpoint. After each restart (journal replay)
// every entry the bookie acknowledged reads back byte-identical.
func TestSIGKILLLosesNoAckedEntry(t *testing.T) {
	dir := t.TempDir()
	cc := childConfig{Bookie: bookie.Config{
		ListenAddr:    freePort(t),
		JournalDir:    filepath.Join(dir, "journal"),
		LedgerDir:     filepath.Join(dir, "ledgers"),
		FlushInterval: 20 * time.Millisecond,
	}}
	rounds := 4
	if testing.Short() {
		rounds = 2
	}
	acked := map[[2]uint64][]byte{}
	for round := 0; round < rounds; round++ {
		child := startChild(t, cc)
		ledger := uint64(100 + round)
		got := writeUntilKilled(t, cc.Bookie.ListenAddr, ledger, child, 300+round*400)
		if len(got) == 0 {
			t.Fatalf("round %d: nothing acknowledged before the kill", round)
		}
		for k, v := range got {
			acked[k] = v
		}
		t.Logf("round %d: %d entries acked before SIGKILL", round, len(got))
	}
	// Restart and read back everything acked in every round.
	startChild(t, cc)
	c := dial(t, cc.Bookie.ListenAddr)
	id := uint64(0)
	for k, want := range acked {
		id++
		r := c.do(proto.Request{Op: proto.OpRead, ID: id, Ledger: k[0], Entry: k[1]})
		if r.Status != proto.StatusOK {
			t.Fatalf("ledger %d entry %d acked before SIGKILL: read says %v", k[0], k[1], r.Status)
		}
		if !bytes.Equal(r.Payload, want) {
			t.Fatalf("ledger %d entry %d acked before SIGKILL reads back different bytes", k[0], k[1])
		}
	}
}

// writeUntilKilled pipelines adds to ledger until killAfter acks have
// arrived, then SIGKILLs the child while adds are still in flight. It
// returns the acknowledged entries.
func writeUntilKilled(t *testing.T, addr string, ledger uint64, child *childBookie, killAfter int) map[[2]uint64][]byte {
	t.Helper()
	c := dial(t, addr)
	var mu sync.Mutex
	sent := map[uint64][]byte{}
	acked := map[[2]uint64][]byte{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			frame, err := proto.ReadFrame(c.br, 64<<20, nil)
			if err != nil {
				return
			}
			r, err := proto.DecodeResponse(frame)
			if err != nil {
				t.Errorf("decode: %v", err)
				return
			}
			mu.Lock()
			if r.Status == proto.StatusOK {
				acked[[2]uint64{ledger, r.Entry}] = sent[r.Entry]
			}
			n := len(acked)
			mu.Unlock()
			if n == killAfter {
				child.kill()
			}
		}
	}()
	for e := uint64(0); ; e++ {
		size := 100 + int(e%7)*3000
		data := bytes.Repeat([]byte{byte(e), byte(ledger)}, size/2)
		payload := proto.AppendEntry(nil, ledger, e, int64(e)-1, e, data)
		mu.Lock()
		sent[e] = payload
		mu.Unlock()
		b := proto.AppendRequest(nil, &proto.Request{Op: proto.OpAdd, ID: e + 1, Ledger: ledger, Entry: e, Payload: payload})
		if _, err := c.nc.Write(b); err != nil {
			break
		}
		if e > 1_000_000 {
			t.Fatal("child never killed")
		}
	}
	<-done
	return acked
}

type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, addr string) *rawConn {
	t.Helper()
	var nc net.Conn
	var err error
	for i := 0; i < 100; i++ {
		if nc, err = net.Dial("tcp", addr); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *rawConn) do(req proto.Request) proto.Response {
	c.t.Helper()
	if _, err := c.nc.Write(proto.AppendRequest(nil, &req)); err != nil {
		c.t.Fatal(err)
	}
	frame, err := proto.ReadFrame(c.br, 64<<20, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	r, err := proto.DecodeResponse(frame)
	if err != nil {
		c.t.Fatal(err)
	}
	r.Payload = bytes.Clone(r.Payload)
	return r
}
