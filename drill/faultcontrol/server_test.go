package faultcontrol

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/internal/lifecycle"
)

// freeAddr is a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// echo is a TCP server that writes back what it reads.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// fakeRegion is a region whose readiness answers 200 while its file
// exists; its hooks remove and create the file (real commands, no
// shell).
func fakeRegion(t *testing.T, dir, name string) RegionConfig {
	t.Helper()
	up := filepath.Join(dir, name+".up")
	if err := os.WriteFile(up, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := os.Stat(up); err != nil {
			http.Error(w, "down", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	return RegionConfig{Name: name, Ready: srv.URL + "/readyz", Kill: []string{"rm", "-f", up}, Start: []string{"touch", up}}
}

func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	s := NewServer(cfg, nil)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return s
}

type apiClient struct {
	t    *testing.T
	base string
}

func (c apiClient) post(path string) (int, string) {
	c.t.Helper()
	resp, err := http.Post(c.base+path, "application/json", nil)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (c apiClient) must(path string) {
	c.t.Helper()
	if code, body := c.post(path); code != http.StatusNoContent {
		c.t.Fatalf("POST %s: %d %s", path, code, body)
	}
}

func (c apiClient) regions() map[string]RegionState {
	c.t.Helper()
	resp, err := http.Get(c.base + "/regions")
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var rs []RegionState
	if err := json.NewDecoder(resp.Body).Decode(&rs); err != nil {
		c.t.Fatal(err)
	}
	out := map[string]RegionState{}
	for _, r := range rs {
		out[r.Name] = r
	}
	return out
}

// roundTrip writes a line on conn and reads it back, or fails.
func roundTrip(conn net.Conn) (time.Duration, error) {
	start := time.Now()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(conn, buf); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// TestServerHooksAndLinks drives the API of a server over two regions:
// the hooks kill and start them (the readiness URL agreeing), the links
// add their latency, a partition cuts every link into and out of a
// region (the other region's link to it too) and a black hole stalls
// them, the heal restores them; unknown regions and actions, a region
// without links, a failing hook, a hook that hangs and a kill the region
// survives are refused saying why.
func TestServerHooksAndLinks(t *testing.T) {
	dir := t.TempDir()
	target := echo(t)
	r0, r1, r2, r3 := fakeRegion(t, dir, "r0"), fakeRegion(t, dir, "r1"), fakeRegion(t, dir, "r2"), fakeRegion(t, dir, "r3")
	r0.Links = []LinkConfig{{To: "r1", Listen: freeAddr(t), Target: target}, {To: GlobalStore, Listen: freeAddr(t), Target: target}}
	r1.Links = []LinkConfig{{To: "r0", Listen: freeAddr(t), Target: target}}
	r2.Kill = []string{"sh", "-c", "echo no such unit >&2; exit 3"}
	r2.Start = []string{"sleep", "30"}
	r3.Kill = []string{"true"} // succeeds, and the region stays up
	s := startServer(t, Config{Listen: "127.0.0.1:0", Latency: 20 * time.Millisecond, HookTimeout: time.Second, Regions: []RegionConfig{r0, r1, r2, r3}})
	c := apiClient{t, s.URL()}

	st := c.regions()
	if !st["r0"].Up || st["r0"].WAN != "up" || !st["r1"].Up || st["r1"].WAN != "up" || !st["r2"].Up || st["r2"].WAN != "" {
		t.Fatalf("regions %+v", st)
	}
	conn, err := net.Dial("tcp", r1.Links[0].Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if rtt, err := roundTrip(conn); err != nil || rtt < 40*time.Millisecond {
		t.Fatalf("round trip through r1->r0: %v %v, want at least 2 x 20ms", rtt, err)
	}

	// r0's partition cuts r1's link to r0 too.
	c.must("/regions/r0/partition")
	if _, err := roundTrip(conn); err == nil {
		t.Fatal("r1->r0 still carries bytes after r0's partition")
	}
	if st := c.regions(); st["r0"].WAN != "cut" || st["r1"].WAN != "cut" || !st["r0"].Up {
		t.Fatalf("after partition: %+v", st)
	}
	c.must("/regions/r0/heal")
	if st := c.regions(); st["r0"].WAN != "up" || st["r1"].WAN != "up" {
		t.Fatalf("after heal: %+v", st)
	}
	conn, err = net.Dial("tcp", r0.Links[1].Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := roundTrip(conn); err != nil {
		t.Fatalf("r0->global after the heal: %v", err)
	}
	c.must("/regions/r0/blackhole")
	if _, err := roundTrip(conn); err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("r0->global black-holed: %v, want a timeout", err)
	}
	if st := c.regions(); st["r0"].WAN != "blackhole" {
		t.Fatalf("after blackhole: %+v", st)
	}
	c.must("/regions/r0/heal")
	buf := make([]byte, 5) // the black-holed ping arrives after the heal
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ping\n" {
		t.Fatalf("after the heal: %q %v", buf, err)
	}

	c.must("/regions/r0/kill")
	if st := c.regions(); st["r0"].Up || !st["r1"].Up {
		t.Fatalf("after kill: %+v", st)
	}
	c.must("/regions/r0/start")
	if st := c.regions(); !st["r0"].Up {
		t.Fatalf("after start: %+v", st)
	}

	for _, bad := range []struct {
		path string
		code int
		want []string
	}{
		{"/regions/nosuch/kill", http.StatusNotFound, []string{`no region \"nosuch\"`}},
		{"/regions/r0/explode", http.StatusNotFound, []string{`unknown action \"explode\"`}},
		{"/regions/r2/partition", http.StatusConflict, []string{"no WAN links", "r2"}},
		{"/regions/r2/kill", http.StatusConflict, []string{"kill r2: hook [sh -c", "exit status 3", "no such unit"}},
		{"/regions/r2/start", http.StatusConflict, []string{"start r2: hook [sleep 30] did not exit in time"}},
		{"/regions/r3/kill", http.StatusConflict, []string{"kill r3: the hook succeeded", "still answers"}},
	} {
		start := time.Now()
		code, body := c.post(bad.path)
		if code != bad.code {
			t.Errorf("POST %s: %d %s, want %d", bad.path, code, body, bad.code)
		}
		for _, w := range bad.want {
			if !strings.Contains(body, w) {
				t.Errorf("POST %s: %s, does not say %s", bad.path, body, w)
			}
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("POST %s took %v (hook timeout 1s)", bad.path, took)
		}
	}
}

// TestServerStartFailureListensOnNothing: when one address is taken, Start
// fails with lifecycle.ErrListen and leaves nothing listening.
func TestServerStartFailureListensOnNothing(t *testing.T) {
	dir := t.TempDir()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	r0 := fakeRegion(t, dir, "r0")
	first := freeAddr(t)
	r0.Links = []LinkConfig{{To: GlobalStore, Listen: first, Target: "127.0.0.1:1"}, {To: GlobalStore, Listen: busy.Addr().String(), Target: "127.0.0.1:1"}}
	s := NewServer(Config{Listen: "127.0.0.1:0", Regions: []RegionConfig{r0}}, nil)
	err = s.Start(context.Background())
	if !errors.Is(err, lifecycle.ErrListen) || !strings.Contains(err.Error(), busy.Addr().String()) {
		t.Fatalf("start: %v, want ErrListen naming %s", err, busy.Addr())
	}
	ln, err := net.Listen("tcp", first)
	if err != nil {
		t.Fatalf("the first link still listens: %v", err)
	}
	ln.Close()
}

// TestServerPartitionHooks: a region with partition and heal hooks is cut
// and healed by running them (here they create and remove a file), its
// state following them ("unknown" after one failed); a black hole and a
// failing hook are refused saying why, and a region's links are left
// alone by another region's hooks.
func TestServerPartitionHooks(t *testing.T) {
	dir := t.TempDir()
	target := echo(t)
	r0, r1, r2 := fakeRegion(t, dir, "r0"), fakeRegion(t, dir, "r1"), fakeRegion(t, dir, "r2")
	cut := filepath.Join(dir, "r0.cut")
	r0.Partition, r0.Heal = []string{"touch", cut}, []string{"rm", cut}
	r1.Links = []LinkConfig{{To: "r0", Listen: freeAddr(t), Target: target}}
	r2.Partition, r2.Heal = []string{"sh", "-c", "echo no such network >&2; exit 1"}, []string{"true"}
	s := startServer(t, Config{Listen: "127.0.0.1:0", HookTimeout: time.Second, Regions: []RegionConfig{r0, r1, r2}})
	c := apiClient{t, s.URL()}

	if st := c.regions(); st["r0"].WAN != "up" || st["r1"].WAN != "up" || st["r2"].WAN != "up" {
		t.Fatalf("regions %+v", st)
	}
	c.must("/regions/r0/partition")
	if _, err := os.Stat(cut); err != nil {
		t.Fatalf("the partition hook did not run: %v", err)
	}
	// r1's link to r0 is r1's: r0's hooks leave it up.
	if st := c.regions(); st["r0"].WAN != "cut" || !st["r0"].Up || st["r1"].WAN != "up" {
		t.Fatalf("after partition: %+v", st)
	}
	c.must("/regions/r0/heal")
	if _, err := os.Stat(cut); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the heal hook did not run: %v", err)
	}
	if st := c.regions(); st["r0"].WAN != "up" {
		t.Fatalf("after heal: %+v", st)
	}

	for _, bad := range []struct {
		path string
		want []string
	}{
		{"/regions/r0/blackhole", []string{"no WAN links", "r0 is cut by its partition and heal commands", "needs regions[].links"}},
		{"/regions/r0/heal", []string{"heal r0: hook [rm", "exit status 1"}}, // nothing to remove
		{"/regions/r2/partition", []string{"partition r2: hook [sh -c", "exit status 1", "no such network"}},
	} {
		code, body := c.post(bad.path)
		if code != http.StatusConflict {
			t.Errorf("POST %s: %d %s, want 409", bad.path, code, body)
		}
		for _, w := range bad.want {
			if !strings.Contains(body, w) {
				t.Errorf("POST %s: %s, does not say %s", bad.path, body, w)
			}
		}
	}
	if st := c.regions(); st["r0"].WAN != "unknown" || st["r2"].WAN != "unknown" {
		t.Fatalf("after failed hooks: %+v", st)
	}
}
