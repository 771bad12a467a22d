package replicator

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/isobar-mq/isobar/replicator/frame"
	"github.com/isobar-mq/isobar/replicator/zdict"
)

// dictLevels are Config.DictLevel's values ("": fastest, as for plain
// frames: BenchmarkPayloadSet).
var dictLevels = map[string]zstd.EncoderLevel{
	"":        zstd.SpeedFastest,
	"fastest": zstd.SpeedFastest,
	"default": zstd.SpeedDefault,
	"better":  zstd.SpeedBetterCompression,
}

// dictionaries are a worker's zstd dictionaries (docs/replication.md,
// "Dictionaries"): on the source side, per namespace, the training core
// (package zdict) and the dictionary in use; on the sink side, the
// dictionaries frames carried, at most Config.DictCache of them (the
// least recently used is dropped; a frame naming it again is refused
// with CodeUnknownDict and sent again carrying it).
type dictionaries struct {
	policy zdict.Policy
	level  zstd.EncoderLevel
	lim    frame.Limits
	max    int

	mu   sync.Mutex
	ns   map[string]*nsDict
	recv map[frame.DictID]*recvDict
	tick uint64 // orders recv by use
}

// nsDict is a namespace's dictionary state on the source side.
type nsDict struct {
	core    *zdict.Namespace
	dict    *frame.Dict // in use; nil: none yet
	version int
}

type recvDict struct {
	d    *frame.Dict
	used uint64
}

func newDictionaries(cfg Config, lim frame.Limits) *dictionaries {
	return &dictionaries{
		policy: zdict.Policy{Samples: cfg.DictSamples, DictBytes: cfg.DictBytes, Drift: cfg.DictDrift},
		level:  dictLevels[cfg.DictLevel],
		lim:    lim,
		max:    cfg.DictCache,
		ns:     map[string]*nsDict{},
		recv:   map[frame.DictID]*recvDict{},
	}
}

// known is the sink's lookup of a dictionary a frame names.
func (ds *dictionaries) known(id frame.DictID) *frame.Dict {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	r := ds.recv[id]
	if r == nil {
		return nil
	}
	ds.tick++
	r.used = ds.tick
	return r.d
}

// keep holds a dictionary a frame carried, dropping the least recently
// used one beyond the bound.
func (ds *dictionaries) keep(d *frame.Dict) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	ds.tick++
	if r := ds.recv[d.ID()]; r != nil {
		r.used = ds.tick
		return
	}
	ds.recv[d.ID()] = &recvDict{d: d, used: ds.tick}
	for len(ds.recv) > ds.max {
		var oldest frame.DictID
		var at uint64
		first := true
		for id, r := range ds.recv {
			if first || r.used < at {
				oldest, at, first = id, r.used, false
			}
		}
		delete(ds.recv, oldest)
	}
}

// held is how many received dictionaries the sink holds.
func (ds *dictionaries) held() int {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return len(ds.recv)
}

// forFrame samples a frame's entries into namespace's core and returns
// the dictionary to compress it with (nil: none yet) with its version,
// and whether to also compress it plainly to measure the dictionary's
// gain. When the core has its samples, it starts training (see train).
func (w *Worker) dictForFrame(namespace string, entries []frame.Entry) (d *frame.Dict, version int, compare bool) {
	ds := w.dicts
	ds.mu.Lock()
	defer ds.mu.Unlock()
	n := ds.ns[namespace]
	if n == nil {
		n = &nsDict{core: zdict.New(ds.policy)}
		ds.ns[namespace] = n
	}
	if n.core.State() == zdict.Collecting {
		for _, e := range entries {
			n.core.Sample(e.Data)
		}
		if samples, ok := n.core.Train(); ok {
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				w.train(namespace, n.version+1, samples)
			}()
		}
	}
	if n.dict == nil {
		return nil, 0, false
	}
	return n.dict, n.version, n.core.Compare()
}

// train builds namespace's next dictionary from samples (off the
// streams' goroutines) and puts it in use.
func (w *Worker) train(namespace string, version int, samples [][]byte) {
	start := time.Now()
	data, err := zdict.Train(namespace, version, samples, w.dicts.policy, w.dicts.level)
	var d *frame.Dict
	if err == nil {
		d, err = frame.NewDict(data, w.dicts.lim)
	}
	ds := w.dicts
	ds.mu.Lock()
	n := ds.ns[namespace]
	if err != nil {
		n.core.Failed()
	} else {
		n.version = n.core.Trained()
		n.dict = d
	}
	ds.mu.Unlock()
	result := "ok"
	if err != nil {
		result = "failed"
		w.log.Info("replication dictionary: training failed; frames stay as they are", "namespace", namespace, "version", version, "err", err)
	} else {
		w.log.Info("replication dictionary trained", "namespace", namespace, "version", version, "id", d.ID(), "bytes", len(data), "samples", len(samples), "took", time.Since(start).Round(time.Millisecond))
	}
	w.metrics.trainings.Add(context.Background(), 1, metric.WithAttributes(attribute.String("isobar.source", w.cfg.Region), attribute.String("isobar.namespace", namespace), attribute.String("isobar.result", result)))
}

// dictFrameSent records a confirmed frame of namespace compressed with
// the dictionary of version: raw body bytes, wire bytes without a
// carried dictionary, and plain, its size without the dictionary when
// measured (0: not).
func (w *Worker) dictFrameSent(namespace string, version, raw, wire, plain int) {
	ds := w.dicts
	ds.mu.Lock()
	n := ds.ns[namespace]
	drifted := n != nil && n.core.Frame(version, raw, wire, plain)
	gain := 0.0
	if n != nil {
		gain = n.core.Gain()
	}
	ds.mu.Unlock()
	if drifted {
		w.log.Info("replication dictionary is stale; retraining", "namespace", namespace, "version", version, "gain", gain)
	}
}

// dictStatus is a namespace's dictionary as metrics report it.
type dictStatus struct {
	namespace   string
	version     int
	ratio, gain float64
}

func (w *Worker) dictStatuses() []dictStatus {
	ds := w.dicts
	ds.mu.Lock()
	defer ds.mu.Unlock()
	out := make([]dictStatus, 0, len(ds.ns))
	for name, n := range ds.ns {
		out = append(out, dictStatus{namespace: name, version: n.version, ratio: n.core.Ratio(), gain: n.core.Gain()})
	}
	return out
}

// CodeUnknownDict is the HeaderErrorCode of a sink's refusal of a frame
// compressed with a dictionary it does not hold (frame.ErrUnknownDict):
// the source sends the frame again, carrying the dictionary.
const CodeUnknownDict = "unknown-dictionary"

// refusedForDict says how a refused frame compressed with a dictionary
// is sent again: carrying it, when the sink does not hold it; plainly,
// when the sink predates dictionaries (it reads version 1 frames only).
func refusedForDict(err error, carried bool) (carry, plain bool) {
	var re *replyError
	if !errors.As(err, &re) {
		return false, false
	}
	switch {
	case re.code == CodeUnknownDict && !carried:
		return true, false
	case re.code == "" && oldFrameRefusal(re.msg):
		return false, true
	}
	return false, false
}

// oldFrameRefusal matches a refusal by a sink that reads version 1
// frames only: it refuses the version.
func oldFrameRefusal(msg string) bool {
	return strings.Contains(msg, "unsupported version 2")
}
