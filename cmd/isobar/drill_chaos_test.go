package main

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/drill"
)

// chaosBasePort is TestDrillChaos's port plan (three regions): 3900-4142
// and 5330-5531, apart from the other fixed plans of this package's
// tests (see devTestBasePort).
const chaosBasePort = "3900"

// TestDrillChaos runs `isobar drill chaos` for 25 s of faults against a
// three-region `isobar dev` behind a 40 ms WAN, with a random seed (set
// ISOBAR_CHAOS_SEED to replay one; the seed is logged), and checks that
// it passed: nothing acknowledged missing from any region's copy,
// nothing stored twice, every producer's order kept, every region
// converged, every step taken, one planned move, and one delete and
// re-create of the delete topic that finished, with nothing of the
// deleted incarnation seen after.
// chaosCISeed is TestDrillChaos's schedule unless ISOBAR_CHAOS_SEED says
// otherwise: a kill, a planned move and partitions and black holes over
// 25 s of three regions, and a delete while r1 is killed (answered 503
// naming r1 until it is back).
const chaosCISeed = 7780047808937027

func TestDrillChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("federation drill: skipped with -short")
	}
	// A fixed schedule by default: CI gates every landing on this test,
	// and the run's timing still varies from one run to the next.
	// ISOBAR_CHAOS_SEED=random draws a new one (the seed is logged, to
	// replay it); ISOBAR_CHAOS_SEED=N replays N.
	seed := uint64(chaosCISeed)
	switch s := os.Getenv("ISOBAR_CHAOS_SEED"); s {
	case "":
	case "random":
		seed = rand.Uint64() >> 11
	default:
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("ISOBAR_CHAOS_SEED: %v", err)
		}
	}
	t.Logf("seed %d (replay: ISOBAR_CHAOS_SEED=%d)", seed, seed)
	dir, eps := startDrillDev(t, chaosBasePort)
	jsonPath := filepath.Join(dir, "chaos.json")
	start := time.Now()
	out, err := run(context.Background(), "drill", "chaos", "--endpoints", eps, "--duration", "25s", "--seed", strconv.FormatUint(seed, 10),
		"--json", jsonPath, "--log-level", "warn")
	t.Logf("chaos drill, seed %d, in %v:\n%s", seed, time.Since(start).Round(time.Second), out)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var r drill.ChaosReport
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%s: %v", jsonPath, err)
	}
	if !r.Passed || r.Seed != seed || r.Lost != 0 || r.DuplicatedCopy != 0 || r.OrderViolations != 0 || r.DeliveryOrderViolations != 0 || len(r.NotConverged) != 0 {
		t.Errorf("seed %d: passed %v (seed %d), lost %d, stored twice %d, out of order %d stored / %d delivered, not converged %v; failures %q",
			seed, r.Passed, r.Seed, r.Lost, r.DuplicatedCopy, r.OrderViolations, r.DeliveryOrderViolations, r.NotConverged, r.Failures)
	}
	if !strings.Contains(out, "seed "+strconv.FormatUint(seed, 10)) || !strings.Contains(out, ": PASSED") {
		t.Errorf("table:\n%s", out)
	}
	// Three namespaces (active-active, active-standby, sync) with a
	// plain and a partitioned topic each; a producer per region on the
	// active-active ones, one on each other one; a consumer per region on
	// every topic; and the delete topic, with a producer and a consumer
	// per region in each of its two incarnations.
	if len(r.Topics) != 7 || len(r.Producers) != 16 || len(r.Consumers) != 24 || r.Acknowledged == 0 {
		t.Errorf("seed %d: %d topics, %d producers, %d consumers, %d acknowledged", seed, len(r.Topics), len(r.Producers), len(r.Consumers), r.Acknowledged)
	}
	for _, tp := range r.Topics {
		if len(tp.Copies) != 3 || tp.Copies[0].Distinct == 0 {
			t.Errorf("seed %d: %s: copies %+v", seed, tp.Topic, tp.Copies)
		}
	}
	moves := 0
	for _, s := range r.Schedule {
		if s.Action == drill.Move {
			moves++
		}
		if s.TakenMS == nil || s.Error != "" {
			t.Errorf("seed %d: step %+v not taken", seed, s)
		}
	}
	if moves != 1 {
		t.Errorf("seed %d: %d planned moves", seed, moves)
	}
	if len(r.Deletes) != 1 || r.DeletesCompleted != 1 || r.Resurrected != 0 {
		t.Errorf("seed %d: deletes %+v, %d finished, %d resurrected", seed, r.Deletes, r.DeletesCompleted, r.Resurrected)
	}
	for _, d := range r.Deletes {
		t.Logf("delete through %s planned at %d ms: first answer %d, %d answered 503, %d creates refused, finished after %v ms, created again after %v ms",
			d.Region, d.PlannedMS, d.FirstStatus, d.Unavailable, d.BeingDeleted, deref(d.CompletedMS), deref(d.RecreatedMS))
	}
	// The new incarnation's messages reached every region.
	del := r.Topics[len(r.Topics)-1]
	for _, c := range del.Copies {
		if c.Distinct == 0 {
			t.Errorf("seed %d: %s in %s: nothing of the new incarnation", seed, del.Topic, c.Region)
		}
	}
}

func deref(p *int64) any {
	if p == nil {
		return "-"
	}
	return *p
}
