package diskperf

import (
	"testing"
	"time"
)

func TestMeasure(t *testing.T) {
	r, err := Measure(t.TempDir(), 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.FsyncPerSec <= 0 || r.SeqSyncedMBps <= 0 || r.SeqBufferedMBs <= 0 || r.SeqColdReadMBs <= 0 || r.FsyncP99 < r.FsyncP50 {
		t.Fatalf("implausible result %+v", r)
	}
	t.Log(r)
	if _, err := Measure("/nonexistent/dir", time.Millisecond); err == nil {
		t.Fatal("missing dir accepted")
	}
	mb, err := MeasureColdRead(t.TempDir(), 8<<20, time.Second)
	if err != nil || mb <= 0 {
		t.Fatalf("MeasureColdRead: %v MB/s, %v", mb, err)
	}
	if err := DropCache("/nonexistent/file"); err == nil {
		t.Fatal("DropCache of a missing file succeeded")
	}
}
