package region_test

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// regionParallel is how many of this package's parallel tests run at
// once when the caller does not say (-parallel). Its long tests are
// federations of real regions that mostly wait (leases expiring,
// failovers, stores coming back: about half a core each on 2 cores), and
// run one after the other they take about 10 minutes, which is as long as
// go test lets a package run by default (the go command kills a test
// binary at its -timeout plus a minute, whatever the binary sets for
// itself). Those tests call t.Parallel and run four at a time.
const regionParallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(regionParallel)); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
