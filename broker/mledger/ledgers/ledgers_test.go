package ledgers_test

import (
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker/mledger/ledgers"
	"github.com/isobar-mq/isobar/broker/mledger/ledgers/ledgerstest"
	"github.com/isobar-mq/isobar/internal/testcluster"
)

// TestConformanceOnBookies runs the suite against real bookies, the
// reference the in-memory ledgers (package memledger) are checked by.
func TestConformanceOnBookies(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{Bookies: 2})
	ledgerstest.Run(t, func(t *testing.T) ledgers.Store {
		c, err := ledger.NewClient(cl.Connect(), ledger.Config{
			Region:          cl.Region,
			Logger:          cl.Logger(),
			RequestTimeout:  5 * time.Second,
			LongPollTimeout: 300 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return ledgers.OnBookies(c)
	})
}
