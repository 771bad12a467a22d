// Package faultcontrol owns the fault-control API that failover drills
// inject faults through (docs/drills.md): the HTTP API itself, served over
// any Backend (`isobar dev`'s in-process federation, or Server); Server,
// the standalone `isobar fault-control` for a federation of `isobar
// region` processes or a real deployment, which kills and starts a region
// by running the operator's hook commands and cuts its links by proxying
// them (package wanproxy); and that server's configuration, parsed and
// validated apart from any I/O (Parse).
package faultcontrol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
)

// Action is what the API does to a region.
type Action string

// The actions of POST /regions/{name}/{action}.
const (
	// Kill stops every process of the region as a crash would; its data
	// stays.
	Kill Action = "kill"
	// Start starts a killed region again on its data.
	Start Action = "start"
	// Partition cuts every WAN link into and out of the region: open
	// connections are reset, new ones closed.
	Partition Action = "partition"
	// Blackhole makes those links carry nothing, closing nothing.
	Blackhole Action = "blackhole"
	// Heal brings them back up.
	Heal Action = "heal"
)

// Actions lists every action, in the order the API's errors name them.
var Actions = []Action{Kill, Start, Partition, Blackhole, Heal}

// RegionState is one region in GET /regions.
type RegionState struct {
	Name string `json:"name"`
	// Up is whether the region runs (for Server: whether its readiness
	// URL answers 2xx).
	Up bool `json:"up"`
	// WAN is the state of the region's links ("up", "cut",
	// "blackhole"), or of its partition and heal hooks ("up", "cut",
	// "unknown" after one failed); empty when it has neither.
	WAN string `json:"wan,omitempty"`
}

// Backend is what the API acts on.
type Backend interface {
	// Regions reports every region, in a stable order.
	Regions(ctx context.Context) []RegionState
	// Act does action to the named region and returns once it is done.
	// An unknown region is an error wrapping ErrUnknownRegion; a WAN
	// action on a region without links (a blackhole of one with
	// partition and heal hooks), one wrapping ErrNoWAN.
	Act(ctx context.Context, region string, action Action) error
}

// Errors a Backend's Act wraps.
var (
	ErrUnknownRegion = errors.New("faultcontrol: no such region")
	ErrNoWAN         = errors.New("faultcontrol: no WAN links")
)

// Handler serves the fault-control API over b:
//
//	GET  /regions                   each region: name, up or down, its WAN links' state
//	POST /regions/{name}/kill       stop the region as a crash would (data stays)
//	POST /regions/{name}/start      start a killed region again on its data
//	POST /regions/{name}/partition  cut its WAN links
//	POST /regions/{name}/blackhole  black-hole its WAN links
//	POST /regions/{name}/heal       bring its WAN links back up
//
// A POST answers 204 once the action is done; 404 for an unknown region
// or action, 409 with {"reason": ...} when the action failed.
func Handler(b Backend) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /regions", func(w http.ResponseWriter, r *http.Request) {
		out := b.Regions(r.Context())
		if out == nil {
			out = []RegionState{}
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /regions/{name}/{action}", func(w http.ResponseWriter, r *http.Request) {
		name, action := r.PathValue("name"), Action(r.PathValue("action"))
		if !slices.Contains(Actions, action) {
			writeJSON(w, http.StatusNotFound, reason(fmt.Sprintf("unknown action %q: kill, start, partition, blackhole or heal", action)))
			return
		}
		err := b.Act(r.Context(), name, action)
		switch {
		case err == nil:
			w.WriteHeader(http.StatusNoContent)
		case errors.Is(err, ErrUnknownRegion):
			writeJSON(w, http.StatusNotFound, reason(err.Error()))
		default:
			writeJSON(w, http.StatusConflict, reason(err.Error()))
		}
	})
	return mux
}

func reason(s string) map[string]string { return map[string]string{"reason": s} }

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"reason":"encode"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}
