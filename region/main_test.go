package region_test

import (
	"flag"
	"os"
	"testing"
)

// regionTimeout is this package's own test timeout when the caller gives
// none: its federation tests (real regions, faults, drills) take 10 to 13
// minutes on 2 cores, beyond go test's default of 10, and `go test ./...`
// must pass as it is. Any other -timeout is kept.
const regionTimeout = "30m"

// goTestDefaultTimeout is go test's default -timeout, as the flag prints
// it.
const goTestDefaultTimeout = "10m0s"

func TestMain(m *testing.M) {
	flag.Parse()
	// go test passes its default as if given (-test.timeout=10m0s), so
	// the default is told apart by its value; 0 (no timeout) and any
	// other value are kept.
	if f := flag.Lookup("test.timeout"); f != nil && f.Value.String() == goTestDefaultTimeout {
		if err := flag.Set("test.timeout", regionTimeout); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
