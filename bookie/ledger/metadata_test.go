package ledger

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func testMetadata() Metadata {
	return Metadata{
		Version: MetadataVersion, EnsembleSize: 3, WriteQuorum: 2, AckQuorum: 2,
		State: StateOpen, LastEntry: -1,
		Ensembles: []Segment{{FirstEntry: 0, Bookies: []string{"a", "b", "c"}}},
		CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

func TestMetadataValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Metadata)
		want   string // substring of the error; empty: valid
	}{
		{"valid", func(*Metadata) {}, ""},
		{"valid closed", func(m *Metadata) { m.State, m.LastEntry, m.Length = StateClosed, 9, 100 }, ""},
		{"valid empty closed", func(m *Metadata) { m.State = StateClosed }, ""},
		{"valid segments", func(m *Metadata) {
			m.Ensembles = append(m.Ensembles, Segment{FirstEntry: 5, Bookies: []string{"a", "d", "c"}})
		}, ""},
		{"version", func(m *Metadata) { m.Version = 2 }, "version 2"},
		{"qa above qw", func(m *Metadata) { m.AckQuorum = 3 }, "ack quorum 3"},
		{"qw above e", func(m *Metadata) { m.WriteQuorum = 4 }, "write quorum 4"},
		{"zero e", func(m *Metadata) { m.EnsembleSize = 0 }, "ensemble size 0"},
		{"huge e", func(m *Metadata) { m.EnsembleSize = 65 }, "ensemble size 65"},
		{"bad state", func(m *Metadata) { m.State = "gone" }, `unknown state "gone"`},
		{"open with last entry", func(m *Metadata) { m.LastEntry = 3 }, "last entry 3"},
		{"closed below -1", func(m *Metadata) { m.State, m.LastEntry = StateClosed, -2 }, "below -1"},
		{"no ensembles", func(m *Metadata) { m.Ensembles = nil }, "no ensembles"},
		{"first not 0", func(m *Metadata) { m.Ensembles[0].FirstEntry = 1 }, "not 0"},
		{"not increasing", func(m *Metadata) {
			m.Ensembles = append(m.Ensembles, Segment{FirstEntry: 0, Bookies: []string{"a", "d", "c"}})
		}, "not after"},
		{"wrong size", func(m *Metadata) { m.Ensembles[0].Bookies = []string{"a", "b"} }, "has 2 bookies"},
		{"duplicate bookie", func(m *Metadata) { m.Ensembles[0].Bookies = []string{"a", "b", "a"} }, "twice"},
		{"empty bookie", func(m *Metadata) { m.Ensembles[0].Bookies = []string{"a", "", "c"} }, "is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testMetadata()
			tc.mutate(&m)
			err := m.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				b, err := EncodeMetadata(&m)
				if err != nil {
					t.Fatal(err)
				}
				back, err := DecodeMetadata(b)
				if err != nil {
					t.Fatal(err)
				}
				if !back.CreatedAt.Equal(m.CreatedAt) || back.State != m.State || back.LastEntry != m.LastEntry ||
					!sameEnsembles(back.Ensembles, m.Ensembles) {
					t.Fatalf("round trip: %+v != %+v", back, m)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one mentioning %q", err, tc.want)
			}
			if _, err := EncodeMetadata(&m); err == nil {
				t.Fatal("EncodeMetadata accepted invalid metadata")
			}
		})
	}
}

func TestMetadataJSONFormat(t *testing.T) {
	// The documented format (docs/format/ledger-metadata.md).
	m := testMetadata()
	m.Properties = map[string]string{"topic": "t1"}
	b, err := EncodeMetadata(&m)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "ensembleSize", "writeQuorum", "ackQuorum", "state", "lastEntry", "length", "ensembles", "createdAt", "properties"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("field %q missing from %s", k, b)
		}
	}
	if _, err := DecodeMetadata([]byte(`{"version":1`)); err == nil {
		t.Error("truncated JSON accepted")
	}
}

func TestWithEnsembleChange(t *testing.T) {
	base := testMetadata()
	base.Ensembles = append(base.Ensembles, Segment{FirstEntry: 10, Bookies: []string{"a", "d", "c"}})
	for _, tc := range []struct {
		name    string
		start   int64
		replace map[int]string
		want    []Segment
		wantErr string
	}{
		{"new segment", 15, map[int]string{2: "e"}, []Segment{
			{0, []string{"a", "b", "c"}}, {10, []string{"a", "d", "c"}}, {15, []string{"a", "d", "e"}}}, ""},
		{"in place when nothing was acknowledged on it", 10, map[int]string{0: "e"}, []Segment{
			{0, []string{"a", "b", "c"}}, {10, []string{"e", "d", "c"}}}, ""},
		{"two at once", 11, map[int]string{0: "e", 1: "f"}, []Segment{
			{0, []string{"a", "b", "c"}}, {10, []string{"a", "d", "c"}}, {11, []string{"e", "f", "c"}}}, ""},
		{"before the current ensemble", 9, map[int]string{0: "e"}, nil, "before"},
		{"duplicate", 12, map[int]string{0: "c"}, nil, "twice"},
		{"bad index", 12, map[int]string{3: "e"}, nil, "out of range"},
		{"nothing", 12, nil, nil, "no bookie"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := base.WithEnsembleChange(tc.start, tc.replace)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !sameEnsembles(got.Ensembles, tc.want) {
				t.Fatalf("ensembles %v, want %v", got.Ensembles, tc.want)
			}
			if err := got.Validate(); err != nil {
				t.Fatal(err)
			}
			if len(base.Ensembles) != 2 || base.Ensembles[1].Bookies[0] != "a" {
				t.Fatal("WithEnsembleChange modified its receiver")
			}
		})
	}
}

func TestSegmentFor(t *testing.T) {
	m := testMetadata()
	m.Ensembles = []Segment{{0, []string{"a", "b", "c"}}, {10, []string{"a", "d", "c"}}, {25, []string{"e", "d", "c"}}}
	for _, tc := range []struct {
		entry int64
		first int64
	}{{0, 0}, {9, 0}, {10, 10}, {24, 10}, {25, 25}, {1000, 25}} {
		if got := m.SegmentFor(tc.entry); got.FirstEntry != tc.first {
			t.Errorf("SegmentFor(%d) starts at %d, want %d", tc.entry, got.FirstEntry, tc.first)
		}
	}
	if got := m.AllBookies(); !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) {
		t.Errorf("AllBookies = %v", got)
	}
}

func TestCreateOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		o    CreateOptions
		want string
	}{
		{CreateOptions{}, ""},
		{CreateOptions{Ensemble: 5, WriteQuorum: 3, AckQuorum: 2}, ""},
		{CreateOptions{Ensemble: 1}, ""},
		{CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 3}, "ack quorum 3"},
		{CreateOptions{Ensemble: 3, WriteQuorum: 4, AckQuorum: 2}, "write quorum 4"},
		{CreateOptions{Ensemble: -1, WriteQuorum: 1, AckQuorum: 1}, "ensemble size -1"},
		{CreateOptions{Properties: map[string]string{"": "x"}}, "empty key"},
	} {
		err := tc.o.withDefaults().Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", tc.o, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want ErrInvalid mentioning %q", tc.o, err, tc.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	err := Config{Region: "a/b", RequestTimeout: -1, MaxInFlight: -2, MaxEntrySize: -1}.Validate()
	for _, want := range []string{"ledger.region", "ledger.requestTimeout", "ledger.maxInFlight", "ledger.maxEntrySize"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}

func FuzzDecodeMetadata(f *testing.F) {
	m := testMetadata()
	b, _ := EncodeMetadata(&m)
	f.Add(b)
	m.State, m.LastEntry = StateClosed, 4
	m.Ensembles = append(m.Ensembles, Segment{FirstEntry: 3, Bookies: []string{"x", "b", "c"}})
	b, _ = EncodeMetadata(&m)
	f.Add(b)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"ensembleSize":-1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMetadata(b)
		if err != nil {
			return
		}
		// Whatever decodes is usable: re-encodes, and every entry has a segment.
		if _, err := EncodeMetadata(&m); err != nil {
			t.Fatalf("decoded metadata does not re-encode: %v", err)
		}
		for _, e := range []int64{0, 1, 1 << 40} {
			seg := m.SegmentFor(e)
			for _, idx := range WriteSet(e, m.EnsembleSize, m.WriteQuorum) {
				_ = seg.Bookies[idx]
			}
		}
	})
}
