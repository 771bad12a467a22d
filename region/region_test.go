package region

import (
	"context"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	err := Config{Name: "-Bad", Bookies: 100, BookiePort: 70000}.Validate()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, field := range []string{"region.name", "region.dataDir", "region.bookies", "region.bookiePort"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not name %s: %v", field, err)
		}
	}
}

// A region that fails part-way through start-up (here: a bookie whose
// config is invalid) stops what it started and reports the bookie.
func TestStartFailureCleansUp(t *testing.T) {
	cfg := Config{Name: "r", DataDir: t.TempDir(), Bookies: 1}
	cfg.Bookie.ReadOnlyThreshold = 7
	_, err := Start(context.Background(), cfg, Deps{})
	if err == nil || !strings.Contains(err.Error(), "bookie 0") || !strings.Contains(err.Error(), "readOnlyThreshold") {
		t.Fatalf("err %v", err)
	}
	// The embedded etcd was stopped: the same directory starts again.
	cfg.Bookie.ReadOnlyThreshold = 0
	r, err := Start(context.Background(), cfg, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if eps := r.Endpoints(); len(eps.Bookies) != 1 || eps.MetadataURL == "" {
		t.Fatalf("endpoints %+v", eps)
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
