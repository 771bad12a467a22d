package mledger

import (
	"context"
	"fmt"

	"github.com/isobar-mq/isobar/errkind"
)

// ErrTerminated fails an add to a terminated managed ledger (Pulsar's
// TopicTerminatedError).
var ErrTerminated = errkind.Sentinel(errkind.ErrTopicTerminated, "mledger: terminated: the topic takes no more messages")

// Terminate ends the log: the adds queued before it complete, then the
// metadata records it terminated and every later add fails with
// ErrTerminated, for good (Pulsar's topic termination). It returns the
// position of the last entry ((first ledger, -1) for an empty log).
// Terminating a terminated log returns its last position again.
func (m *ManagedLedger) Terminate(ctx context.Context) (Position, error) {
	type result struct {
		p   Position
		err error
	}
	done := make(chan result, 1)
	m.addAsync(ctx, addRequest{terminate: true, cb: func(p Position, err error) { done <- result{p, err} }})
	select {
	case r := <-done:
		return r.p, r.err
	case <-ctx.Done():
		return Position{}, fmt.Errorf("mledger %s: terminate: %w", m.name, ctx.Err())
	}
}

// Terminated reports whether the log was terminated.
func (m *ManagedLedger) Terminated() bool { return m.terminated.Load() }

// terminate runs a Terminate request in the driver, after the adds before
// it were issued: it waits for them to complete (settling any the ledger
// failed), then records the termination. Driver only.
func (m *ManagedLedger) terminate(r addRequest) {
	if m.terminated.Load() {
		r.cb(m.LastConfirmed(), nil)
		return
	}
	for {
		m.l().inflight.Wait()
		m.l().failedMu.Lock()
		failed := len(m.l().failed)
		m.l().failedMu.Unlock()
		if failed == 0 {
			break
		}
		m.repairBroken() // re-issues the adds the ledger did not keep
	}
	err := m.update(context.Background(), func(t *topicMeta) error {
		t.Terminated = true
		return nil
	})
	if err != nil {
		r.cb(Position{}, fmt.Errorf("mledger %s: terminate: %w", m.name, err))
		return
	}
	m.terminated.Store(true)
	m.logger().Info("terminated", "last", m.LastConfirmed())
	r.cb(m.LastConfirmed(), nil)
}
