// Package diskperf measures what a disk can do for a journal: the rate of
// small write+fdatasync pairs and the sequential bandwidth of large writes
// each followed by fdatasync. Benchmarks print these next to their own
// numbers so the ratio to the hardware limit is visible.
package diskperf

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"
)

// Result is one measurement of a directory's disk.
type Result struct {
	Dir            string
	FsyncPerSec    float64       // small (4 KiB) write + fdatasync pairs per second
	FsyncP50       time.Duration // latency of one small write + fdatasync
	FsyncP99       time.Duration
	SeqSyncedMBps  float64 // MB/s (10^6) of 1 MiB writes, each followed by fdatasync
	SeqBufferedMBs float64 // MB/s of 1 MiB writes with one fdatasync at the end
}

func (r Result) String() string {
	return fmt.Sprintf("disk %s: fdatasync %.0f/s (p50 %v, p99 %v); sequential 1 MiB+fdatasync %.0f MB/s; buffered sequential %.0f MB/s",
		r.Dir, r.FsyncPerSec, r.FsyncP50.Round(time.Microsecond), r.FsyncP99.Round(time.Microsecond), r.SeqSyncedMBps, r.SeqBufferedMBs)
}

// Measure spends about d in each of its three phases writing a scratch file
// in dir, which it removes.
func Measure(dir string, d time.Duration) (Result, error) {
	res := Result{Dir: dir}
	f, err := os.CreateTemp(dir, "diskperf-*")
	if err != nil {
		return res, fmt.Errorf("diskperf: %w", err)
	}
	name := f.Name()
	defer os.Remove(name)
	defer f.Close()

	small := make([]byte, 4096)
	var lats []time.Duration
	start := time.Now()
	for time.Since(start) < d {
		t0 := time.Now()
		if _, err := f.Write(small); err != nil {
			return res, fmt.Errorf("diskperf: write: %w", err)
		}
		if err := fdatasync(f); err != nil {
			return res, fmt.Errorf("diskperf: fdatasync: %w", err)
		}
		lats = append(lats, time.Since(t0))
	}
	el := time.Since(start)
	res.FsyncPerSec = float64(len(lats)) / el.Seconds()
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	res.FsyncP50 = lats[len(lats)/2]
	res.FsyncP99 = lats[len(lats)*99/100]

	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	res.SeqSyncedMBps, err = sequential(filepath.Join(dir, filepath.Base(name)+".seq"), big, d, true)
	if err != nil {
		return res, err
	}
	res.SeqBufferedMBs, err = sequential(filepath.Join(dir, filepath.Base(name)+".buf"), big, d, false)
	return res, err
}

func sequential(name string, buf []byte, d time.Duration, syncEach bool) (float64, error) {
	f, err := os.Create(name)
	if err != nil {
		return 0, fmt.Errorf("diskperf: %w", err)
	}
	defer os.Remove(name)
	defer f.Close()
	var n int64
	start := time.Now()
	for time.Since(start) < d {
		if _, err := f.Write(buf); err != nil {
			return 0, fmt.Errorf("diskperf: write: %w", err)
		}
		n += int64(len(buf))
		if syncEach {
			if err := fdatasync(f); err != nil {
				return 0, fmt.Errorf("diskperf: fdatasync: %w", err)
			}
		}
	}
	if err := fdatasync(f); err != nil {
		return 0, fmt.Errorf("diskperf: fdatasync: %w", err)
	}
	return float64(n) / 1e6 / time.Since(start).Seconds(), nil
}

func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
