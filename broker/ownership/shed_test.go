package ownership

import (
	"fmt"
	"slices"
	"testing"
)

// rep is a report whose bundles carry msgRateIn (messages/s) each; its
// CPU is cpu percent.
func rep(cpu float64, bundles ...float64) *LoadReport {
	r := &LoadReport{CPU: ResourceUsage{Usage: cpu, Limit: 100}, LastStats: map[string]BundleLoad{}}
	for i, m := range bundles {
		r.LastStats[fmt.Sprintf("t/ns/b%d", i)] = BundleLoad{MsgRateIn: m}
		r.MsgRateIn += m
	}
	return r
}

func TestShed(t *testing.T) {
	tests := []struct {
		name    string
		reports map[string]*LoadReport
		skip    []string
		want    []Unload
	}{
		{"one broker", map[string]*LoadReport{"a": rep(90, 5000, 5000)}, nil, nil},
		{"balanced", map[string]*LoadReport{"a": rep(50, 2000, 2000), "b": rep(50, 3000, 1000)}, nil, nil},
		{"just above the mean: hysteresis", map[string]*LoadReport{"a": rep(0, 1000, 1050), "b": rep(0, 1000, 950)}, nil, nil},
		{"idle region, noise", map[string]*LoadReport{"a": rep(4), "b": rep(1)}, nil, nil},
		{"overloaded sheds its heaviest bundle",
			// a scores 8 (8000 msg/s), b 0: mean 4; a sheds 4000 of 8000.
			map[string]*LoadReport{"a": rep(0, 1000, 4000, 2000, 1000), "b": rep(0)}, nil,
			[]Unload{{"a", "t/ns/b1"}}},
		{"takes several until the target",
			// a 6, b 0, c 0: mean 2; a sheds 4000 of 6000.
			map[string]*LoadReport{"a": rep(0, 2000, 2000, 1000, 1000), "b": rep(0), "c": rep(0)}, nil,
			[]Unload{{"a", "t/ns/b0"}, {"a", "t/ns/b1"}}},
		{"skips a bundle moved recently",
			map[string]*LoadReport{"a": rep(0, 1000, 4000, 2000, 1000), "b": rep(0)}, []string{"t/ns/b1"},
			[]Unload{{"a", "t/ns/b2"}, {"a", "t/ns/b0"}, {"a", "t/ns/b3"}}},
		{"never the last bundle", map[string]*LoadReport{"a": rep(0, 9000), "b": rep(0)}, nil, nil},
		{"keeps one bundle", map[string]*LoadReport{"a": rep(0, 5000, 5000), "b": rep(0), "c": rep(0), "d": rep(0)}, nil,
			[]Unload{{"a", "t/ns/b0"}}},
		{"CPU alone: no bundle to choose", map[string]*LoadReport{"a": rep(90, 0, 0), "b": rep(0)}, nil, nil},
		{"missing report scores zero",
			map[string]*LoadReport{"a": rep(0, 3000, 3000), "b": nil}, nil,
			[]Unload{{"a", "t/ns/b0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			skip := func(b string) bool { return slices.Contains(tt.skip, b) }
			got := Shed(tt.reports, ShedConfig{}, skip)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Shed = %v; want %v", got, tt.want)
			}
			// Deterministic.
			if again := Shed(tt.reports, ShedConfig{}, skip); !slices.Equal(again, got) {
				t.Errorf("second Shed = %v; first %v", again, got)
			}
		})
	}
}
