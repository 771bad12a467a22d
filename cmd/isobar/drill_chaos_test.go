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
// converged, every step taken, one planned move.
// chaosCISeed is TestDrillChaos's schedule unless ISOBAR_CHAOS_SEED says
// otherwise: a kill, a planned move and partitions and black holes over
// 25 s of three regions.
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
	// every topic.
	if len(r.Topics) != 6 || len(r.Producers) != 10 || len(r.Consumers) != 18 || r.Acknowledged == 0 {
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
}
