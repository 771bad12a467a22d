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
	if r.FsyncPerSec <= 0 || r.SeqSyncedMBps <= 0 || r.SeqBufferedMBs <= 0 || r.FsyncP99 < r.FsyncP50 {
		t.Fatalf("implausible result %+v", r)
	}
	t.Log(r)
	if _, err := Measure("/nonexistent/dir", time.Millisecond); err == nil {
		t.Fatal("missing dir accepted")
	}
}
