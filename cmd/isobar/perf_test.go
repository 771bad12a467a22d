package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestPerfUsageErrors checks pulsar-perf's flag names and the earlier
// long names (scripts use them) before anything dials a broker.
func TestPerfUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string // substrings of the error
	}{
		{[]string{"perf", "produce"}, []string{"at least one topic"}},
		{[]string{"perf", "produce", "t", "--rate", "-1", "--size", "0", "--producers", "0", "--max-pending", "0", "--batch-max-delay", "0s"},
			[]string{"--rate", "--size", "--producers", "--max-pending", "--batch-max-delay"}},
		{[]string{"perf", "produce", "t", "-r", "-1", "-s", "0", "-n", "0", "-o", "0", "-b", "0"},
			[]string{"-r/--rate", "-s/--size", "-n/--num-producers", "-o/--max-outstanding", "-b/--batch-time-window"}},
		{[]string{"perf", "produce", "t", "--partitions", "3", "--admin-url", "localhost:8080"}, []string{"--admin-url"}},
		{[]string{"perf", "produce", "t", "-np", "3", "-au", "localhost:8080"}, []string{"--admin-url"}},
		{[]string{"perf", "produce", "t", "-np", "-1", "-m", "-5"}, []string{"--partitions", "-m/--num-messages"}},
		{[]string{"perf", "produce", "t", "--duration", "-1s", "--report-interval", "0s"}, []string{"--duration", "--report-interval"}},
		{[]string{"perf", "produce", "t", "-time", "-3"}, []string{"-test-duration", "negative"}},
		{[]string{"perf", "produce", "t", "-time", "soon"}, []string{"--test-duration", "seconds"}},
		{[]string{"perf", "produce", "a", "b", "-t", "3"}, []string{"-t/--num-topics", "2 topics given"}},
		{[]string{"perf", "produce", "t", "-u", "http://h:1"}, []string{"--service-url"}},
		{[]string{"perf", "consume", "t", "-s", "", "--receiver-queue", "0", "--duration", "-1s", "-st", "x"},
			[]string{"--subscriber-name", "--receiver-queue", "--duration", "-st/--subscription-type"}},
		{[]string{"perf", "consume", "t", "-ss", "a,,b", "-q", "0", "-sp", "Middle", "-n", "2"},
			[]string{"--subscriptions", "-q/--receiver-queue-size", "-sp/--subscription-position", "Exclusive subscription takes one consumer"}},
		{[]string{"perf", "consume", "t", "-m", "-1", "-r", "-2", "-time", "x"}, []string{"--test-duration"}},
		{[]string{"perf", "consume", "t", "-m", "-1", "-r", "-2"}, []string{"-m/--num-messages", "-r/--rate"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			_, err := run(ctx, tc.args...)
			if err == nil {
				t.Fatal("no error")
			}
			if code := exitCode(err); code != 2 {
				t.Errorf("exit code %d for %v, want 2", code, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v: a usage error must not wait for a broker", d)
			}
		})
	}
}

// TestPerfDefaultsArePulsarPerfs checks the defaults pulsar-perf users
// expect: 100 msg/s, one producer, no message limit or time limit.
func TestPerfDefaultsArePulsarPerfs(t *testing.T) {
	root := newRootCmd()
	produce, _, err := root.Find([]string{"perf", "produce"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"rate": "100", "num-producers": "1", "num-messages": "0", "test-duration": "0s", "size": "1024", "num-topics": "1"} {
		if f := produce.Flags().Lookup(name); f == nil || f.DefValue != want {
			t.Errorf("perf produce --%s: %+v, want default %s", name, f, want)
		}
	}
	for short, name := range map[string]string{"r": "rate", "n": "num-producers", "m": "num-messages", "s": "size", "t": "num-topics", "u": "service-url"} {
		if f := produce.Flags().ShorthandLookup(short); f == nil || f.Name != name {
			t.Errorf("perf produce -%s: %+v, want --%s", short, f, name)
		}
	}
}

// TestPerfProduceConsumeWithPulsarPerfFlags runs perf produce and consume
// against a broker with pulsar-perf's flags: two topics from one name,
// two producers each, a message count; the service URL from the
// environment for produce.
func TestPerfProduceConsumeWithPulsarPerfFlags(t *testing.T) {
	_, serviceURL, _ := adminRegion(t)
	type summary struct {
		Topic    string `json:"topic"`
		Messages int64  `json:"messages"`
		Errors   int64  `json:"errors"`
	}
	perf := func(args ...string) summary {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := run(ctx, append(args, "--json", "--log-level", "error", "--report-interval", "1h")...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		var s summary
		if err := json.Unmarshal([]byte(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]), &s); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return s
	}
	const base = "persistent://public/default/perfflags"
	t.Setenv("ISOBAR_SERVICE_URL", serviceURL)
	p := perf("perf", "produce", base, "-t", "2", "-n", "2", "-m", "40", "-r", "0", "-s", "64", "-time", "50")
	if p.Messages != 40 || p.Errors != 0 || p.Topic != base+"-0,"+base+"-1" {
		t.Errorf("produce: %+v", p)
	}
	c := perf("perf", "consume", base, "-u", serviceURL, "-t", "2", "-ss", "s1", "-st", "Shared", "-n", "2", "-sp", "Earliest", "-m", "40", "-time", "50")
	if c.Messages != 40 || c.Errors != 0 {
		t.Errorf("consume: %+v", c)
	}
}

func TestPulsarFlagSpellings(t *testing.T) {
	cmd := newPerfProduceCmd(&globalFlags{})
	got := rewriteSingleDash(cmd, []string{"t", "-time", "30", "-np=4", "-n", "2", "-au", "http://h:8080", "--", "-time"})
	want := []string{"t", "--test-duration", "30", "--partitions=4", "-n", "2", "--admin-url", "http://h:8080", "--", "-time"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("rewriteSingleDash = %q, want %q", got, want)
	}
	for in, want := range map[string]time.Duration{"30": 30 * time.Second, "1.5": 1500 * time.Millisecond, "2m": 2 * time.Minute, "0": 0} {
		var d time.Duration
		if err := (secondsValue{&d}).Set(in); err != nil || d != want {
			t.Errorf("seconds %q = %v, %v; want %v", in, d, err, want)
		}
	}
	for in, want := range map[string]time.Duration{"1": time.Millisecond, "0.5": 500 * time.Microsecond, "250us": 250 * time.Microsecond} {
		var d time.Duration
		if err := (millisValue{&d}).Set(in); err != nil || d != want {
			t.Errorf("millis %q = %v, %v; want %v", in, d, err, want)
		}
	}
	for _, bad := range []string{"", "x", "1e300", "NaN"} {
		var d time.Duration
		if err := (secondsValue{&d}).Set(bad); err == nil {
			t.Errorf("seconds %q = %v, want an error", bad, d)
		}
	}
	if ts, err := perfTopics(cmd, []string{"a"}, 3); err != nil || strings.Join(ts, ",") != "a-0,a-1,a-2" {
		t.Errorf("perfTopics(a, 3) = %v, %v", ts, err)
	}
	if ts, err := perfTopics(cmd, []string{"a", "b"}, 2); err != nil || strings.Join(ts, ",") != "a,b" {
		t.Errorf("perfTopics(a b, 2) = %v, %v", ts, err)
	}
}
