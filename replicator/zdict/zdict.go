// Package zdict owns when a namespace's zstd dictionary is trained and
// retrained, and training it: a pure core per namespace that takes what
// the replicator sends (entries to sample, frames with their compressed
// sizes) and says when to train (with which samples) and when the
// dictionary in use has gone stale. It does no I/O, takes no lock and
// reads no clock; the replicator's worker drives it (docs/replication.md,
// "Dictionaries").
package zdict

import (
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/zstd"
)

// Policy tunes training. A zero field means its default.
type Policy struct {
	// Samples is how many entries a dictionary is trained on (default
	// 256): the first entries the namespace sends once it collects.
	Samples int
	// SampleBytes is how much of each sampled entry is kept (default
	// 8 KiB): a dictionary serves the start of a frame, and a batch's
	// first messages show its shape.
	SampleBytes int
	// DictBytes is the dictionary's largest size (default 32 KiB).
	DictBytes int
	// CompareEvery: every CompareEvery-th frame compressed with a
	// dictionary is also compressed without it (default 10), to measure
	// what the dictionary gains: its gain is the frames' size with it
	// over their size without it. The gain, not the ratio to raw bytes,
	// tells a stale dictionary: a change of payloads that compress better
	// anyway (larger or more repetitive messages) would hide one.
	CompareEvery int
	// Window is how many compared frames make one measure of the gain,
	// and how many frames one measure of the ratio reported as
	// Ratio (default 10).
	Window int
	// Drift is how much worse than right after training (the first
	// window's gain) a later window's gain may be before the dictionary
	// is retrained, as a fraction of the plain size (default 0.05: with
	// a gain of 0.80 at first, retrain past 0.85).
	Drift float64
	// Pause is how many frames the namespace sends plainly after a
	// training that failed (too little or too uniform data) before it
	// collects again (default 1000).
	Pause int
}

// Defaults of Policy.
const (
	DefaultSamples      = 256
	DefaultSampleBytes  = 8 << 10
	DefaultDictBytes    = 32 << 10
	DefaultCompareEvery = 10
	DefaultWindow       = 10
	DefaultDrift        = 0.05
	DefaultPause        = 1000
)

// WithDefaults fills zero fields.
func (p Policy) WithDefaults() Policy {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&p.Samples, DefaultSamples)
	def(&p.SampleBytes, DefaultSampleBytes)
	def(&p.DictBytes, DefaultDictBytes)
	def(&p.Window, DefaultWindow)
	def(&p.CompareEvery, DefaultCompareEvery)
	def(&p.Pause, DefaultPause)
	if p.Drift <= 0 {
		p.Drift = DefaultDrift
	}
	return p
}

// State is where a namespace's dictionary stands.
type State int

const (
	// Collecting: sampling entries to train on.
	Collecting State = iota
	// Training: the samples were handed out; waiting for Trained or
	// Failed.
	Training
	// Using: a dictionary is in use and measured.
	Using
	// Paused: training failed; frames go plainly for a while.
	Paused
)

func (s State) String() string {
	return [...]string{"collecting", "training", "using", "paused"}[s]
}

// Namespace is the core of one namespace. Its zero value is not usable:
// New makes one.
type Namespace struct {
	p       Policy
	state   State
	samples [][]byte
	held    int // bytes in samples
	version int // of the dictionary in use; 0: none yet

	frames   int     // frames of the version in use
	baseline float64 // gain of the first window after training; 0: not measured yet
	gain     float64 // gain of the last full window
	winWire  int64   // compared frames: size with the dictionary...
	winPlain int64   // ...and without
	winN     int

	last    float64 // wire/raw of the last full ratio window
	rawSum  int64
	wireSum int64
	rawN    int

	paused int // frames left to send plainly
}

// New returns the core of a namespace that has no dictionary yet: it
// starts collecting.
func New(p Policy) *Namespace {
	return &Namespace{p: p.WithDefaults()}
}

// State is the namespace's state.
func (n *Namespace) State() State { return n.state }

// Version is the version of the dictionary in use, 0 before the first.
func (n *Namespace) Version() int { return n.version }

// Ratio is wire/raw of the last Window frames with the dictionary in
// use, 0 before they were sent.
func (n *Namespace) Ratio() float64 { return n.last }

// Gain is the last full window's size of compared frames with the
// dictionary over their size without it (below 1: it helps), 0 before
// one was measured.
func (n *Namespace) Gain() float64 { return n.gain }

// Held is the bytes of samples held now (at most Samples × SampleBytes).
func (n *Namespace) Held() int { return n.held }

// Sample offers entries the namespace sends. While collecting, it keeps a
// copy of the first SampleBytes of each (empty ones are no sample) until
// it has Samples.
func (n *Namespace) Sample(entries ...[]byte) {
	if n.state != Collecting {
		return
	}
	for _, e := range entries {
		if len(n.samples) >= n.p.Samples {
			return
		}
		if len(e) == 0 {
			continue
		}
		s := append([]byte(nil), e[:min(len(e), n.p.SampleBytes)]...)
		n.samples = append(n.samples, s)
		n.held += len(s)
	}
}

// Train says whether to train now: when collecting with Samples
// samples, it returns them (the core lets go of them) and the namespace
// is training until Trained or Failed.
func (n *Namespace) Train() (samples [][]byte, ok bool) {
	if n.state != Collecting || len(n.samples) < n.p.Samples {
		return nil, false
	}
	samples = n.samples
	n.samples, n.held = nil, 0
	n.state = Training
	return samples, true
}

// Trained records that training produced the next dictionary, which is
// in use from now on; it returns its version (1 for the first).
func (n *Namespace) Trained() int {
	if n.state != Training {
		return n.version
	}
	n.version++
	n.state = Using
	n.baseline, n.gain, n.last, n.frames = 0, 0, 0, 0
	n.resetWindow()
	n.rawSum, n.wireSum, n.rawN = 0, 0, 0
	return n.version
}

// Failed records that training produced no dictionary: the dictionary in
// use (if any) stays, and the namespace collects again after Pause
// frames.
func (n *Namespace) Failed() {
	if n.state != Training {
		return
	}
	n.state = Paused
	n.paused = n.p.Pause
	n.resetWindow()
}

// Compare says whether the next frame (compressed with the dictionary
// in use) should also be compressed without it, and its size given to
// Frame as plain.
func (n *Namespace) Compare() bool {
	return n.state == Using && n.frames%n.p.CompareEvery == 0
}

// Frame records a frame the namespace sent: version of the dictionary it
// was compressed with (0: none), raw body bytes, wire bytes (the frame
// without a carried dictionary) and, when Compare asked for it, plain:
// its wire bytes without the dictionary (0: not compared). Frames of
// another version than the one in use are ignored. When a full window
// of compared frames shows a gain more than Drift worse than the first
// window's, the namespace collects again (the dictionary stays in use
// until the next is trained) and Frame returns true.
func (n *Namespace) Frame(version, raw, wire, plain int) (drifted bool) {
	if n.state == Paused {
		if n.paused--; n.paused <= 0 {
			n.state = Collecting
		}
		return false
	}
	if version == 0 || version != n.version || raw <= 0 {
		return false
	}
	n.frames++
	n.rawSum += int64(raw)
	n.wireSum += int64(wire)
	if n.rawN++; n.rawN >= n.p.Window {
		n.last = float64(n.wireSum) / float64(n.rawSum)
		n.rawSum, n.wireSum, n.rawN = 0, 0, 0
	}
	if plain <= 0 {
		return false
	}
	n.winWire += int64(wire)
	n.winPlain += int64(plain)
	if n.winN++; n.winN < n.p.Window {
		return false
	}
	gain := float64(n.winWire) / float64(n.winPlain)
	n.resetWindow()
	n.gain = gain
	if n.baseline == 0 {
		n.baseline = gain
		return false
	}
	if n.state == Using && gain > n.baseline+n.p.Drift {
		n.state = Collecting
		return true
	}
	return false
}

func (n *Namespace) resetWindow() { n.winWire, n.winPlain, n.winN = 0, 0, 0 }

// ErrNoDictionary means the samples gave no dictionary (too few, too
// small or too uniform).
var ErrNoDictionary = errors.New("zdict: no dictionary from these samples")

// Train builds a zstd dictionary of at most p's DictBytes from samples,
// tuned for level, for version version of namespace's dictionary (which
// sets the zstd dictionary id). The builder is not deterministic: the
// same samples may give different bytes, which frames tell apart by
// their content hash (frame.DictID).
func Train(namespace string, version int, samples [][]byte, p Policy, level zstd.EncoderLevel) (data []byte, err error) {
	p = p.WithDefaults()
	defer func() {
		// The builder is experimental: a panic on odd input is no
		// dictionary, not a crashed worker.
		if r := recover(); r != nil {
			data, err = nil, fmt.Errorf("%w: %v", ErrNoDictionary, r)
		}
	}()
	if len(samples) < 8 {
		return nil, fmt.Errorf("%w: %d samples", ErrNoDictionary, len(samples))
	}
	data, err = dict.BuildZstdDict(samples, dict.Options{
		MaxDictSize: p.DictBytes,
		HashBytes:   6,
		ZstdDictID:  dictID(namespace, version),
		ZstdLevel:   level,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDictionary, err)
	}
	return data, nil
}

// dictID is the zstd dictionary id of a namespace's version: in the range
// RFC 8878 leaves to private use (32768 .. 2^31-1). Frames name their
// dictionary by content (frame.DictID); this id only has to be stable.
func dictID(namespace string, version int) uint32 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s\x00%d", namespace, version)
	return 32768 + h.Sum32()%(1<<31-32768)
}
