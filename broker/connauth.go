package broker

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/isobar-mq/isobar/auth"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// connAuth is a connection's authenticated identity and the refresh of
// an expiring credential: when the token expires the broker sends
// AUTH_CHALLENGE, and a client that does not answer with a valid token
// within authRefreshGrace is disconnected (as Pulsar does with
// authenticationRefreshCheckSeconds; pulsar-client-go answers with its
// current token, re-read from its file).
type connAuth struct {
	mu      sync.Mutex
	id      auth.Identity
	timer   *time.Timer
	pending bool // a challenge awaits its answer
}

// authRefreshGrace is how long a challenged client has to answer.
const authRefreshGrace = 30 * time.Second

// role is the connection's authenticated role ("" without authentication).
func (c *conn) role() string {
	c.auth.mu.Lock()
	defer c.auth.mu.Unlock()
	return c.auth.id.Role
}

// authenticate checks CONNECT's credentials. A client version reserved
// for replicator workers needs a replicator role: no client can pose as
// one to write replicated entries or reach a standby region's topics.
func (c *conn) authenticate(cmd *pb.CommandConnect) error {
	id, err := c.b.auth.Authenticate(cmd.GetAuthMethodName(), cmd.GetAuthData(), c.tlsState())
	if err != nil {
		return err
	}
	// A proxy connects for a client: the client's role is the one
	// authorized from here on (auth.Server.Delegate).
	if id, err = c.b.auth.Delegate(id, cmd.GetOriginalPrincipal(), cmd.GetOriginalAuthMethod(), cmd.GetOriginalAuthData()); err != nil {
		return err
	}
	if c.b.auth.Enabled() && strings.HasPrefix(cmd.GetClientVersion(), replication.ClientVersion) && !c.b.auth.IsReplicator(id.Role) {
		return fmt.Errorf("%w: role %q is not a replicator role (broker.auth.replicatorRoles), so it may not connect as %s", errkind.ErrAuthorization, id.Role, replication.ClientVersion)
	}
	c.auth.mu.Lock()
	c.auth.id = id
	c.auth.mu.Unlock()
	c.scheduleRefresh(id.Expires)
	if id.Role != "" {
		c.log = c.log.With("role", id.Role)
	}
	if id.Proxy != "" {
		c.log = c.log.With("proxy", id.Proxy)
	}
	return nil
}

// scheduleRefresh challenges the client when its credential expires.
func (c *conn) scheduleRefresh(expires time.Time) {
	if expires.IsZero() {
		return
	}
	c.auth.mu.Lock()
	defer c.auth.mu.Unlock()
	if c.auth.timer != nil {
		c.auth.timer.Stop()
	}
	c.auth.pending = false
	c.auth.timer = time.AfterFunc(time.Until(expires), c.challenge)
}

// challenge asks the client for a fresh credential and disconnects it if
// none comes in time.
func (c *conn) challenge() {
	if c.ctx.Err() != nil {
		return
	}
	c.auth.mu.Lock()
	c.auth.pending = true
	c.auth.timer = time.AfterFunc(authRefreshGrace, func() {
		c.auth.mu.Lock()
		pending := c.auth.pending
		c.auth.mu.Unlock()
		if pending && c.ctx.Err() == nil {
			c.log.Info("closing connection: its token expired and no fresh one came", "grace", authRefreshGrace)
			c.sendCmd(wire.NewErrorCommand(0, fmt.Errorf("%w: token expired and not refreshed within %v", errkind.ErrAuthentication, authRefreshGrace)))
			c.close()
		}
	})
	c.auth.mu.Unlock()
	c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_AUTH_CHALLENGE.Enum(), AuthChallenge: &pb.CommandAuthChallenge{
		ServerVersion:   strp(Version),
		ProtocolVersion: &c.protocolVersion,
		Challenge:       &pb.AuthData{AuthMethodName: strp(auth.TokenMethod), AuthData: []byte("refresh")},
	}})
}

// handleAuthResponse takes a refreshed credential. It must be for the
// same role; anything else closes the connection.
func (c *conn) handleAuthResponse(cmd *pb.CommandAuthResponse) error {
	if !c.b.auth.Enabled() {
		return nil // nothing was challenged
	}
	r := cmd.GetResponse()
	id, err := c.b.auth.Authenticate(r.GetAuthMethodName(), r.GetAuthData(), c.tlsState())
	if err == nil && id.Role != c.role() {
		err = fmt.Errorf("%w: a refreshed token must be for role %q, not %q", errkind.ErrAuthentication, c.role(), id.Role)
	}
	if err != nil {
		c.sendCmd(wire.NewErrorCommand(0, err))
		c.drainAndClose()
		return fmt.Errorf("broker: auth response: %w", err)
	}
	c.auth.mu.Lock()
	id.Proxy = c.auth.id.Proxy // a proxied client refreshes through its proxy's pipe
	c.auth.id = id
	c.auth.mu.Unlock()
	c.scheduleRefresh(id.Expires)
	if id.Expires.IsZero() {
		c.auth.mu.Lock()
		if c.auth.timer != nil {
			c.auth.timer.Stop()
		}
		c.auth.pending = false
		c.auth.mu.Unlock()
	}
	return nil
}

// stopAuth stops the refresh timer when the connection ends.
func (c *conn) stopAuth() {
	c.auth.mu.Lock()
	defer c.auth.mu.Unlock()
	if c.auth.timer != nil {
		c.auth.timer.Stop()
	}
}

// mayReplicate reports whether the connection may act as a replicator:
// write replicated entries and bypass a standby region's redirect.
func (c *conn) mayReplicate() bool {
	return strings.HasPrefix(c.clientVersion, replication.ClientVersion) && c.b.auth.IsReplicator(c.role())
}

// authorizeLookup allows a lookup (or partitioned-metadata request) of
// name: replicator workers look up every replicated topic.
func (c *conn) authorizeLookup(ctx context.Context, name topic.Name) error {
	if c.mayReplicate() {
		return nil
	}
	return c.b.authz.Lookup(ctx, c.role(), name)
}

// authorizeProducer allows opening producer pname on name. A replicator
// producer needs a replicator connection; any other needs produce
// permission and, to create its initial subscription, consume permission
// on that subscription too (as in Pulsar).
func (c *conn) authorizeProducer(ctx context.Context, name topic.Name, pname, initialSub string) error {
	if strings.HasPrefix(pname, replication.Prefix) {
		if !c.b.auth.Enabled() || c.mayReplicate() {
			return nil
		}
		if c.b.auth.IsReplicator(c.role()) {
			return fmt.Errorf("%w: producer names starting %s are replicator producers; role %q may open them only on a connection made as %s", errkind.ErrAuthorization, replication.Prefix, c.role(), replication.ClientVersion)
		}
		return fmt.Errorf("%w: producer names starting %s are replicator producers; role %q is not a replicator role", errkind.ErrAuthorization, replication.Prefix, c.role())
	}
	if err := c.b.authz.Produce(ctx, c.role(), name); err != nil {
		return err
	}
	if initialSub != "" {
		return c.b.authz.Consume(ctx, c.role(), name, initialSub)
	}
	return nil
}

// tlsState is the connection's TLS state, nil on a plaintext connection.
func (c *conn) tlsState() *tls.ConnectionState {
	if tc, ok := c.nc.(*tls.Conn); ok {
		st := tc.ConnectionState()
		return &st
	}
	return nil
}
