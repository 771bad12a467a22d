package frame

import (
	"fmt"
	"testing"

	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/zstd"

	"github.com/isobar-mq/isobar/internal/payloadgen"
)

// trainOn builds a dictionary as the replicator does by default
// (replicator/zdict): 256 samples of shape s, a 32 KiB target.
func trainOn(b *testing.B, s payloadgen.Shape, level zstd.EncoderLevel) *Dict {
	b.Helper()
	data, err := dict.BuildZstdDict(payloadgen.New(s, 100).Messages(256), dict.Options{MaxDictSize: 32 << 10, HashBytes: 6, ZstdDictID: 1 << 16, ZstdLevel: level})
	if err != nil {
		b.Fatal(err)
	}
	d, err := NewDict(data, Limits{})
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkPayloadSet encodes the payload set (package payloadgen) in
// frames of per messages, one message per entry, with plain zstd and
// with a dictionary trained on other messages of the same shape, and
// reports wire/payload: frame bytes per message byte. Frames of ~100
// messages are what a stream sends at 10k msg/s, ~1,800 flat out
// (docs/BENCHMARKS.md); small ones are a quiet topic's. The drift cases
// encode the order events after their schema change with the dictionary
// trained before it (stale) and after it (retrained).
func BenchmarkPayloadSet(b *testing.B) {
	type variant struct {
		name  string
		shape payloadgen.Shape
		dict  func(b *testing.B, level zstd.EncoderLevel) *Dict // nil: plain
	}
	var variants []variant
	for _, s := range payloadgen.Shapes {
		variants = append(variants,
			variant{string(s) + "/plain", s, nil},
			variant{string(s) + "/dict", s, func(b *testing.B, l zstd.EncoderLevel) *Dict { return trainOn(b, s, l) }})
	}
	variants = append(variants,
		variant{"drift/plain", payloadgen.OrdersV2, nil},
		variant{"drift/stale", payloadgen.OrdersV2, func(b *testing.B, l zstd.EncoderLevel) *Dict { return trainOn(b, payloadgen.Orders, l) }},
		variant{"drift/retrained", payloadgen.OrdersV2, func(b *testing.B, l zstd.EncoderLevel) *Dict { return trainOn(b, payloadgen.OrdersV2, l) }})
	levels := []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault}
	for _, per := range []int{1, 10, 100, 1800} {
		for _, v := range variants {
			for _, level := range levels {
				if v.dict == nil && level != zstd.SpeedFastest {
					continue // plain frames are always at the fastest level
				}
				b.Run(fmt.Sprintf("per=%d/%s/%s", per, v.name, level), func(b *testing.B) {
					msgs := payloadgen.New(v.shape, 1).Messages(max(3600, 20*per))
					var frames [][]Entry
					var payload int
					for i := 0; i+per <= len(msgs); i += per {
						es := make([]Entry, per)
						for j := range es {
							es[j] = Entry{Pos: Pos{1, int64(i + j)}, Data: msgs[i+j]}
							payload += len(msgs[i+j])
						}
						frames = append(frames, es)
					}
					enc := NewEncoder()
					if v.dict != nil {
						var err error
						if enc, err = NewDictEncoder(v.dict(b, level), level); err != nil {
							b.Fatal(err)
						}
					}
					var out []byte
					var wire, raw int
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; b.Loop(); i++ {
						f := frames[i%len(frames)]
						var r int
						var err error
						out, r, err = enc.Encode(out[:0], f)
						if err != nil {
							b.Fatal(err)
						}
						if i < len(frames) {
							wire += len(out)
							raw += r
						}
					}
					b.StopTimer()
					if wire == 0 || raw == 0 || len(frames) > b.N {
						// Too few iterations to cover the set: measure it once.
						wire, raw = 0, 0
						for _, f := range frames {
							out, r, _ := enc.Encode(out[:0], f)
							wire += len(out)
							raw += r
						}
					}
					b.ReportMetric(float64(wire)/float64(payload), "wire/payload")
					b.ReportMetric(float64(per), "msgs/frame")
				})
			}
		}
	}
}
