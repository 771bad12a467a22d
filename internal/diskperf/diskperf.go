// Package diskperf measures what a disk can do for a journal: the rate of
// small write+fdatasync pairs and the sequential bandwidth of large writes
// each followed by fdatasync; and what it can do for a catch-up reader:
// the sequential bandwidth of reads that miss the page cache. Benchmarks
// print these next to their own numbers so the ratio to the hardware limit
// is visible.
package diskperf

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Result is one measurement of a directory's disk.
type Result struct {
	Dir            string
	FsyncPerSec    float64       // small (4 KiB) write + fdatasync pairs per second
	FsyncP50       time.Duration // latency of one small write + fdatasync
	FsyncP99       time.Duration
	SeqSyncedMBps  float64 // MB/s (10^6) of 1 MiB writes, each followed by fdatasync
	SeqBufferedMBs float64 // MB/s of 1 MiB writes with one fdatasync at the end
	SeqColdReadMBs float64 // MB/s of 1 MiB reads of a file dropped from the page cache
}

func (r Result) String() string {
	return fmt.Sprintf("disk %s: fdatasync %.0f/s (p50 %v, p99 %v); sequential 1 MiB+fdatasync %.0f MB/s; buffered sequential %.0f MB/s; cold sequential read %.0f MB/s",
		r.Dir, r.FsyncPerSec, r.FsyncP50.Round(time.Microsecond), r.FsyncP99.Round(time.Microsecond), r.SeqSyncedMBps, r.SeqBufferedMBs, r.SeqColdReadMBs)
}

// Measure spends about d in each of its four phases writing (then reading
// back) scratch files in dir, which it removes.
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
	seq := filepath.Join(dir, filepath.Base(name)+".seq")
	defer os.Remove(seq)
	res.SeqSyncedMBps, err = sequential(seq, big, d, true)
	if err != nil {
		return res, err
	}
	buf := filepath.Join(dir, filepath.Base(name)+".buf")
	defer os.Remove(buf)
	res.SeqBufferedMBs, err = sequential(buf, big, d, false)
	if err != nil {
		return res, err
	}
	res.SeqColdReadMBs, err = coldRead(buf, big, d)
	return res, err
}

// MeasureColdRead measures only the cold sequential read bandwidth: it
// writes a scratch file of size bytes in dir, drops it from the page cache
// and reads it back in 1 MiB reads for at most d.
func MeasureColdRead(dir string, size int64, d time.Duration) (float64, error) {
	f, err := os.CreateTemp(dir, "diskperf-*")
	if err != nil {
		return 0, fmt.Errorf("diskperf: %w", err)
	}
	name := f.Name()
	defer os.Remove(name)
	defer f.Close()
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	for n := int64(0); n < size; n += int64(len(big)) {
		if _, err := f.Write(big); err != nil {
			return 0, fmt.Errorf("diskperf: write: %w", err)
		}
	}
	if err := fdatasync(f); err != nil {
		return 0, fmt.Errorf("diskperf: fdatasync: %w", err)
	}
	return coldRead(name, big, d)
}

// DropCache makes a file cold: it writes back its dirty pages and tells the
// kernel to drop the file's pages from the page cache
// (posix_fadvise POSIX_FADV_DONTNEED), so the next reads go to the disk.
// Pages written after the fdatasync stay cached.
func DropCache(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("diskperf: %w", err)
	}
	defer f.Close()
	if err := fdatasync(f); err != nil {
		return fmt.Errorf("diskperf: fdatasync %s: %w", name, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("diskperf: fadvise %s: %w", name, err)
	}
	return nil
}

// coldRead drops name from the page cache and reads it from the start in
// len(buf) reads until its end or until d has passed.
func coldRead(name string, buf []byte, d time.Duration) (float64, error) {
	if err := DropCache(name); err != nil {
		return 0, err
	}
	f, err := os.Open(name)
	if err != nil {
		return 0, fmt.Errorf("diskperf: %w", err)
	}
	defer f.Close()
	var n int64
	start := time.Now()
	for time.Since(start) < d {
		k, err := f.Read(buf)
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("diskperf: read: %w", err)
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("diskperf: read: %s is empty", name)
	}
	return float64(n) / 1e6 / time.Since(start).Seconds(), nil
}

func sequential(name string, buf []byte, d time.Duration, syncEach bool) (float64, error) {
	f, err := os.Create(name)
	if err != nil {
		return 0, fmt.Errorf("diskperf: %w", err)
	}
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
