package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/isobar-mq/isobar/drill/faultcontrol"
	"github.com/isobar-mq/isobar/region"
)

// devControl is `isobar dev`'s fault-control API (package faultcontrol,
// docs/failover.md) over its in-process federation: kill and start stop
// and start a region's components, partition, blackhole and heal act on
// the emulated WAN (--wan-latency).
//
// It is a lifecycle component of the dev process: it listens from Start
// to Shutdown.
type devControl struct {
	addr string
	f    *region.Federation
	ln   net.Listener
	srv  *http.Server
}

func (d *devControl) Name() string { return "dev control" }

func (d *devControl) Start(context.Context) error {
	ln, err := net.Listen("tcp", d.addr)
	if err != nil {
		return fmt.Errorf("dev control: %w", err)
	}
	d.ln = ln
	d.srv = &http.Server{Handler: faultcontrol.Handler(d), ReadHeaderTimeout: 10 * time.Second}
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

// Regions implements faultcontrol.Backend: a region is up unless killed;
// its WAN state is its link to the global store's.
func (d *devControl) Regions(context.Context) []faultcontrol.RegionState {
	var out []faultcontrol.RegionState
	for _, r := range d.f.Regions {
		st := faultcontrol.RegionState{Name: r.Name(), Up: !d.f.Down(r.Name())}
		if wan := d.f.WAN(); wan != nil {
			if l := wan.Link(r.Name(), region.GlobalStore); l != nil {
				st.WAN = l.State().String()
			}
		}
		out = append(out, st)
	}
	return out
}

// Act implements faultcontrol.Backend.
func (d *devControl) Act(ctx context.Context, name string, action faultcontrol.Action) error {
	if !slices.ContainsFunc(d.f.Regions, func(r *region.Region) bool { return r.Name() == name }) {
		return fmt.Errorf("%w: no region %q", faultcontrol.ErrUnknownRegion, name)
	}
	wan := d.f.WAN()
	switch action {
	case faultcontrol.Kill:
		return d.f.KillRegion(name)
	case faultcontrol.Start:
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		return d.f.StartRegion(ctx, name)
	}
	if wan == nil {
		return fmt.Errorf("%w: no emulated WAN: start isobar dev with --wan-latency", faultcontrol.ErrNoWAN)
	}
	switch action {
	case faultcontrol.Partition:
		return wan.Partition(name)
	case faultcontrol.Blackhole:
		return wan.Blackhole(name)
	case faultcontrol.Heal:
		return wan.Heal(name)
	}
	return fmt.Errorf("faultcontrol: unknown action %q", action)
}
