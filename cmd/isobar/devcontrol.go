package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/isobar-mq/isobar/region"
)

// devControl is `isobar dev`'s fault-control API, for failover drills
// against a development federation (docs/failover.md):
//
//	GET  /regions                   each region: name, up or down, its WAN links' state
//	POST /regions/{name}/kill       stop the region as a crash would (data stays)
//	POST /regions/{name}/start      start a killed region again on its data
//	POST /regions/{name}/partition  cut its WAN links (needs --wan-latency)
//	POST /regions/{name}/blackhole  black-hole its WAN links
//	POST /regions/{name}/heal       bring its WAN links back up
//
// It is a lifecycle component of the dev process: it listens from Start
// to Shutdown.
type devControl struct {
	addr string
	f    *region.Federation
	ln   net.Listener
	srv  *http.Server
}

// regionState is one region in GET /regions.
type regionState struct {
	Name string `json:"name"`
	Up   bool   `json:"up"`
	// WAN is the state of the region's links ("up", "cut", "blackhole"),
	// empty without an emulated WAN.
	WAN string `json:"wan,omitempty"`
}

func (d *devControl) Name() string { return "dev control" }

func (d *devControl) Start(context.Context) error {
	ln, err := net.Listen("tcp", d.addr)
	if err != nil {
		return fmt.Errorf("dev control: %w", err)
	}
	d.ln = ln
	mux := http.NewServeMux()
	mux.HandleFunc("GET /regions", d.list)
	mux.HandleFunc("POST /regions/{name}/{action}", d.act)
	d.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go d.srv.Serve(ln)
	return nil
}

func (d *devControl) Shutdown(ctx context.Context) error {
	if d.srv == nil {
		return nil
	}
	return d.srv.Shutdown(ctx)
}

func (d *devControl) Abort() {
	if d.srv != nil {
		d.srv.Close()
	}
}

// URL is the API's base URL.
func (d *devControl) URL() string { return "http://" + d.ln.Addr().String() }

func (d *devControl) list(w http.ResponseWriter, _ *http.Request) {
	out := []regionState{}
	for _, r := range d.f.Regions {
		st := regionState{Name: r.Name(), Up: !d.f.Down(r.Name())}
		if wan := d.f.WAN(); wan != nil {
			if l := wan.Link(r.Name(), region.GlobalStore); l != nil {
				st.WAN = l.State().String()
			}
		}
		out = append(out, st)
	}
	writeControlJSON(w, http.StatusOK, out)
}

func (d *devControl) act(w http.ResponseWriter, r *http.Request) {
	name, action := r.PathValue("name"), r.PathValue("action")
	known := false
	for _, reg := range d.f.Regions {
		known = known || reg.Name() == name
	}
	if !known {
		writeControlJSON(w, http.StatusNotFound, map[string]string{"reason": fmt.Sprintf("no region %q", name)})
		return
	}
	wan := d.f.WAN()
	var err error
	switch action {
	case "kill":
		err = d.f.KillRegion(name)
	case "start":
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
		err = d.f.StartRegion(ctx, name)
		cancel()
	case "partition", "blackhole", "heal":
		if wan == nil {
			writeControlJSON(w, http.StatusConflict, map[string]string{"reason": "no emulated WAN: start isobar dev with --wan-latency"})
			return
		}
		switch action {
		case "partition":
			err = wan.Partition(name)
		case "blackhole":
			err = wan.Blackhole(name)
		default:
			err = wan.Heal(name)
		}
	default:
		writeControlJSON(w, http.StatusNotFound, map[string]string{"reason": fmt.Sprintf("unknown action %q: kill, start, partition, blackhole or heal", action)})
		return
	}
	if err != nil {
		writeControlJSON(w, http.StatusConflict, map[string]string{"reason": err.Error()})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func writeControlJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"reason":"encode"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}
