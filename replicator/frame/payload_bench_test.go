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
		name   string
		shapes []payloadgen.Shape // frames of each in turn
		// trained is the shape each dictionary is trained on (nil: plain).
		trained []payloadgen.Shape
	}
	var variants []variant
	for _, s := range payloadgen.Shapes {
		one := []payloadgen.Shape{s}
		variants = append(variants, variant{string(s) + "/plain", one, nil}, variant{string(s) + "/dict", one, one})
	}
	variants = append(variants,
		variant{"mix/plain", payloadgen.Shapes, nil},
		variant{"mix/dict", payloadgen.Shapes, payloadgen.Shapes},
		variant{"drift/plain", []payloadgen.Shape{payloadgen.OrdersV2}, nil},
		variant{"drift/stale", []payloadgen.Shape{payloadgen.OrdersV2}, []payloadgen.Shape{payloadgen.Orders}},
		variant{"drift/retrained", []payloadgen.Shape{payloadgen.OrdersV2}, []payloadgen.Shape{payloadgen.OrdersV2}})
	levels := []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault, zstd.SpeedBetterCompression}
	for _, per := range []int{1, 10, 100, 1800} {
		for _, v := range variants {
			for _, level := range levels {
				if v.trained == nil && level != zstd.SpeedFastest {
					continue // plain frames are always at the fastest level
				}
				b.Run(fmt.Sprintf("per=%d/%s/%s", per, v.name, level), func(b *testing.B) {
					// Frames of each shape in turn, each with its encoder.
					type framed struct {
						entries []Entry
						enc     *Encoder
					}
					var frames []framed
					var payload int
					n := max(3600, 20*per) / len(v.shapes)
					for k, s := range v.shapes {
						enc := NewEncoder()
						if v.trained != nil {
							var err error
							if enc, err = NewDictEncoder(trainOn(b, v.trained[k], level), level); err != nil {
								b.Fatal(err)
							}
						}
						msgs := payloadgen.New(s, 1).Messages(n)
						for i := 0; i+per <= len(msgs); i += per {
							es := make([]Entry, per)
							for j := range es {
								es[j] = Entry{Pos: Pos{1, int64(i + j)}, Data: msgs[i+j]}
								payload += len(msgs[i+j])
							}
							frames = append(frames, framed{es, enc})
						}
					}
					// Interleave the shapes' frames, as a worker sends them.
					if len(v.shapes) > 1 {
						per := len(frames) / len(v.shapes)
						mixed := make([]framed, 0, len(frames))
						for i := range per {
							for k := range v.shapes {
								mixed = append(mixed, frames[k*per+i])
							}
						}
						frames = mixed
					}
					var wire, raw int
					var out []byte
					for _, f := range frames {
						var r int
						out, r, _ = f.enc.Encode(out[:0], f.entries)
						wire += len(out)
						raw += r
					}
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; b.Loop(); i++ {
						f := frames[i%len(frames)]
						var err error
						if out, _, err = f.enc.Encode(out[:0], f.entries); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					b.ReportMetric(float64(wire)/float64(payload), "wire/payload")
					b.ReportMetric(float64(wire)/float64(raw), "wire/raw")
				})
			}
		}
	}
}
