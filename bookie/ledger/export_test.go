package ledger

import (
	"context"

	"github.com/isobar-mq/isobar/bookie/client"
)

// Test-only operations on ledger clients and auditors. They live here,
// compiled only into the package's tests, not in the production API.

// BookieConn returns a connection to bookie id at its current address.
func (c *Client) BookieConn(ctx context.Context, id string) (*client.Conn, error) {
	return c.bookie(ctx, id)
}

// AuditOnce runs one audit pass now (auditOnce).
func (a *Auditor) AuditOnce(ctx context.Context) (AuditReport, error) { return a.auditOnce(ctx) }

// Trigger asks for a pass now, as a decommission does (requestPass).
func (a *Auditor) Trigger() { a.requestPass() }
