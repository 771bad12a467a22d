package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/auth"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// maxRedirects bounds the lookup redirects the proxy follows (the
// client's own bound).
const maxRedirects = 20

// requestTimeout bounds one forwarded request.
const requestTimeout = 30 * time.Second

// lookupLoop serves a lookup connection: the proxy answers CONNECT, then
// forwards the lookup requests to brokers and answers pings; anything
// else is refused (it belongs on a connection to a broker).
func (c *clientConn) lookupLoop() {
	pv := min(c.connect.GetProtocolVersion(), maxProtocolVersion)
	c.writeCmd(&pb.BaseCommand{Type: pb.BaseCommand_CONNECTED.Enum(), Connected: &pb.CommandConnected{
		ServerVersion: strp(serverVersion), ProtocolVersion: &pv,
	}})
	c.scheduleRefresh(c.id.Expires)
	go c.keepAlive()
	for {
		c.nc.SetReadDeadline(time.Now().Add(2*c.s.cfg.KeepAlive + time.Second))
		raw, err := wire.ReadFrame(c.nc, maxLookupFrame, nil)
		if err != nil {
			if errors.Is(err, wire.ErrFrameTooLarge) {
				c.refuse(fmt.Errorf("%w: %w (a lookup connection's frames are at most %d bytes)", errkind.ErrNotAllowed, err, maxLookupFrame))
			}
			return
		}
		f, err := wire.DecodeFrame(raw)
		if err != nil {
			c.refuse(fmt.Errorf("%w: %w", errkind.ErrUnknown, err))
			return
		}
		cmd := f.Cmd
		switch cmd.GetType() {
		case pb.BaseCommand_PING:
			c.writeCmd(&pb.BaseCommand{Type: pb.BaseCommand_PONG.Enum(), Pong: &pb.CommandPong{}})
		case pb.BaseCommand_PONG:
		case pb.BaseCommand_LOOKUP, pb.BaseCommand_PARTITIONED_METADATA,
			pb.BaseCommand_GET_TOPICS_OF_NAMESPACE, pb.BaseCommand_GET_SCHEMA:
			c.async(cmd)
		case pb.BaseCommand_AUTH_RESPONSE:
			if err := c.handleAuthResponse(cmd.AuthResponse); err != nil {
				c.refuse(err)
				return
			}
		default:
			c.writeCmd(wire.NewErrorCommand(requestID(cmd), fmt.Errorf("%w: proxy: %v on a lookup connection; commands for a topic go to a connection to its broker (CONNECT with proxy_to_broker_url, from the lookup's answer)", errkind.ErrNotAllowed, cmd.GetType())))
		}
	}
}

// keepAlive pings the client; the read deadline closes a silent one.
func (c *clientConn) keepAlive() {
	t := time.NewTicker(c.s.cfg.KeepAlive)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			c.writeCmd(&pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}})
		}
	}
}

// async forwards one request in its own goroutine, within the
// connection's and the proxy's bounds.
func (c *clientConn) async(cmd *pb.BaseCommand) {
	reqID := requestID(cmd)
	if c.pending.Add(1) > maxPendingPerConn {
		c.pending.Add(-1)
		c.s.m.rejectedLookup(c.ctx)
		c.writeCmd(wire.NewFailure(cmd.GetType(), reqID, fmt.Errorf("%w: %d requests in progress on this connection", errkind.ErrTooManyRequests, maxPendingPerConn)))
		return
	}
	if c.s.lookups.Add(1) > int64(c.s.cfg.MaxConcurrentLookups) {
		c.s.lookups.Add(-1)
		c.pending.Add(-1)
		c.s.m.rejectedLookup(c.ctx)
		c.writeCmd(wire.NewFailure(cmd.GetType(), reqID, fmt.Errorf("%w: %d lookups in progress", errkind.ErrTooManyRequests, c.s.cfg.MaxConcurrentLookups)))
		return
	}
	c.slow.Add(1)
	go func() {
		defer c.slow.Done()
		defer c.pending.Add(-1)
		defer c.s.lookups.Add(-1)
		c.s.m.lookup(c.ctx, cmd.GetType().String())
		ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
		defer cancel()
		var resp *pb.BaseCommand
		if cmd.GetType() == pb.BaseCommand_LOOKUP {
			resp = c.lookup(ctx, cmd.LookupTopic)
		} else {
			resp = c.anyBroker(ctx, cmd)
		}
		setRequestID(resp, reqID)
		c.writeCmd(resp)
	}()
}

// anyBroker sends cmd to a live broker, another when one cannot be
// reached, and returns its answer.
func (c *clientConn) anyBroker(ctx context.Context, cmd *pb.BaseCommand) *pb.BaseCommand {
	skip := map[string]bool{}
	for {
		b, ok := c.s.pick(skip)
		if !ok {
			return wire.NewFailure(cmd.GetType(), 0, c.noBroker(skip))
		}
		resp, err := c.request(ctx, b, cmd)
		var ue *unreachableError
		if errors.As(err, &ue) {
			skip[b.ID] = true
			continue
		}
		if err != nil {
			return wire.NewFailure(cmd.GetType(), 0, err)
		}
		return resp
	}
}

func (c *clientConn) noBroker(skip map[string]bool) error {
	if len(skip) > 0 {
		return fmt.Errorf("%w: proxy: none of the %d live brokers of region %s could be reached", errkind.ErrServiceNotReady, len(skip), c.s.cfg.Region)
	}
	return fmt.Errorf("%w: proxy: no live broker in region %s", errkind.ErrServiceNotReady, c.s.cfg.Region)
}

// lookup follows a topic lookup through the brokers' redirects to its
// owner and answers with the owner's URL and proxy_through_service_url,
// so the client connects to it through the proxy. A redirect to a URL
// that is not a broker of the region (an active-standby namespace's
// primary region) is passed to the client as it is.
func (c *clientConn) lookup(ctx context.Context, l *pb.CommandLookupTopic) *pb.BaseCommand {
	skip := map[string]bool{}
	b, ok := c.s.pick(skip)
	free := true // b was picked by the proxy, not named by a redirect
	authoritative := false
	for hop := 0; hop < maxRedirects; hop++ {
		if !ok {
			return wire.NewFailure(pb.BaseCommand_LOOKUP, 0, c.noBroker(skip))
		}
		req := &pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{
			Topic: l.Topic, Authoritative: boolp(authoritative),
			AdvertisedListenerName: l.AdvertisedListenerName, Properties: l.Properties,
		}}
		resp, err := c.request(ctx, b, req)
		var ue *unreachableError
		if errors.As(err, &ue) && free {
			skip[b.ID] = true
			b, ok = c.s.pick(skip)
			continue
		}
		if err != nil {
			return wire.NewFailure(pb.BaseCommand_LOOKUP, 0, err)
		}
		if resp.GetType() == pb.BaseCommand_ERROR {
			return wire.NewFailure(pb.BaseCommand_LOOKUP, 0, serverError(resp.Error.GetError(), resp.Error.GetMessage()))
		}
		lr := resp.GetLookupTopicResponse()
		if lr == nil {
			return wire.NewFailure(pb.BaseCommand_LOOKUP, 0, fmt.Errorf("%w: proxy: broker %s answered LOOKUP with %v", errkind.ErrServiceNotReady, b.ID, resp.GetType()))
		}
		switch lr.GetResponse() {
		case pb.CommandLookupTopicResponse_Connect:
			u := lr.GetBrokerServiceUrl()
			return &pb.BaseCommand{Type: pb.BaseCommand_LOOKUP_RESPONSE.Enum(), LookupTopicResponse: &pb.CommandLookupTopicResponse{
				Response: pb.CommandLookupTopicResponse_Connect.Enum(), BrokerServiceUrl: &u, BrokerServiceUrlTls: &u,
				Authoritative: lr.Authoritative, ProxyThroughServiceUrl: boolp(true),
			}}
		case pb.CommandLookupTopicResponse_Redirect:
			next, found := c.s.brokerByHost(hostOf(lr.GetBrokerServiceUrl()))
			if !found && lr.GetBrokerServiceUrlTls() != "" {
				next, found = c.s.brokerByHost(hostOf(lr.GetBrokerServiceUrlTls()))
			}
			if !found {
				return resp // another region's address: the client goes there itself
			}
			b, ok, free, authoritative = next, true, false, lr.GetAuthoritative()
		default:
			return resp
		}
	}
	return wire.NewFailure(pb.BaseCommand_LOOKUP, 0, fmt.Errorf("%w: proxy: more than %d lookup redirects for %s", errkind.ErrServiceNotReady, maxRedirects, l.GetTopic()))
}

// request sends cmd (a copy, with a request id of the backend's) to
// broker b on this client's connection to it, dialling one if needed.
func (c *clientConn) request(ctx context.Context, b brokerInfo, cmd *pb.BaseCommand) (*pb.BaseCommand, error) {
	bk, err := c.backendFor(ctx, b)
	if err != nil {
		return nil, err
	}
	return bk.request(ctx, proto.Clone(cmd).(*pb.BaseCommand))
}

// backendFor returns the connection to broker b, dialling it if there is
// none or it died.
func (c *clientConn) backendFor(ctx context.Context, b brokerInfo) (*backend, error) {
	c.dialMu.Lock()
	defer c.dialMu.Unlock()
	c.mu.Lock()
	bk := c.backends[b.ID]
	c.mu.Unlock()
	if bk != nil && !bk.dead() {
		return bk, nil
	}
	bk, err := c.dialBackend(ctx, b)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		bk.close(errClientGone)
		return nil, errClientGone
	}
	c.backends[b.ID] = bk
	c.mu.Unlock()
	return bk, nil
}

// serverError is the error a broker answered with: its message, of its
// code's kind.
func serverError(code pb.ServerError, msg string) error {
	return fmt.Errorf("%w: %s", wire.ErrorFor(code), msg)
}

// requestID is the request id a request or response carries (0 if its
// kind has none the proxy knows).
func requestID(cmd *pb.BaseCommand) uint64 {
	switch cmd.GetType() {
	case pb.BaseCommand_LOOKUP:
		return cmd.LookupTopic.GetRequestId()
	case pb.BaseCommand_LOOKUP_RESPONSE:
		return cmd.LookupTopicResponse.GetRequestId()
	case pb.BaseCommand_PARTITIONED_METADATA:
		return cmd.PartitionMetadata.GetRequestId()
	case pb.BaseCommand_PARTITIONED_METADATA_RESPONSE:
		return cmd.PartitionMetadataResponse.GetRequestId()
	case pb.BaseCommand_GET_TOPICS_OF_NAMESPACE:
		return cmd.GetTopicsOfNamespace.GetRequestId()
	case pb.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE:
		return cmd.GetTopicsOfNamespaceResponse.GetRequestId()
	case pb.BaseCommand_GET_SCHEMA:
		return cmd.GetSchema.GetRequestId()
	case pb.BaseCommand_GET_SCHEMA_RESPONSE:
		return cmd.GetSchemaResponse.GetRequestId()
	case pb.BaseCommand_ERROR:
		return cmd.Error.GetRequestId()
	case pb.BaseCommand_PRODUCER:
		return cmd.Producer.GetRequestId()
	case pb.BaseCommand_SUBSCRIBE:
		return cmd.Subscribe.GetRequestId()
	case pb.BaseCommand_GET_OR_CREATE_SCHEMA:
		return cmd.GetOrCreateSchema.GetRequestId()
	case pb.BaseCommand_GET_LAST_MESSAGE_ID:
		return cmd.GetLastMessageId.GetRequestId()
	case pb.BaseCommand_UNSUBSCRIBE:
		return cmd.Unsubscribe.GetRequestId()
	case pb.BaseCommand_SEEK:
		return cmd.Seek.GetRequestId()
	}
	return 0
}

// setRequestID sets the request id of a request or response of the
// kinds the proxy forwards.
func setRequestID(cmd *pb.BaseCommand, id uint64) {
	switch cmd.GetType() {
	case pb.BaseCommand_LOOKUP:
		cmd.LookupTopic.RequestId = &id
	case pb.BaseCommand_LOOKUP_RESPONSE:
		cmd.LookupTopicResponse.RequestId = &id
	case pb.BaseCommand_PARTITIONED_METADATA:
		cmd.PartitionMetadata.RequestId = &id
	case pb.BaseCommand_PARTITIONED_METADATA_RESPONSE:
		cmd.PartitionMetadataResponse.RequestId = &id
	case pb.BaseCommand_GET_TOPICS_OF_NAMESPACE:
		cmd.GetTopicsOfNamespace.RequestId = &id
	case pb.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE:
		cmd.GetTopicsOfNamespaceResponse.RequestId = &id
	case pb.BaseCommand_GET_SCHEMA:
		cmd.GetSchema.RequestId = &id
	case pb.BaseCommand_GET_SCHEMA_RESPONSE:
		cmd.GetSchemaResponse.RequestId = &id
	case pb.BaseCommand_ERROR:
		cmd.Error.RequestId = &id
	}
}

// scheduleRefresh challenges the client when its credential expires (a
// lookup connection; a proxied one is challenged by its broker).
func (c *clientConn) scheduleRefresh(expires time.Time) {
	if expires.IsZero() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.awaiting = false
	c.timer = time.AfterFunc(time.Until(expires), c.challenge)
}

// challenge asks the client for a fresh credential and closes the
// connection if none comes in time, as the brokers do.
func (c *clientConn) challenge() {
	if c.ctx.Err() != nil {
		return
	}
	c.mu.Lock()
	c.awaiting = true
	c.timer = time.AfterFunc(authRefreshGrace, func() {
		c.mu.Lock()
		awaiting := c.awaiting
		c.mu.Unlock()
		if awaiting && c.ctx.Err() == nil {
			c.log.Info("closing connection: its token expired and no fresh one came", "grace", authRefreshGrace)
			c.writeCmd(wire.NewErrorCommand(0, fmt.Errorf("%w: token expired and not refreshed within %v", errkind.ErrAuthentication, authRefreshGrace)))
			c.close()
		}
	})
	c.mu.Unlock()
	pv := min(c.connect.GetProtocolVersion(), maxProtocolVersion)
	c.writeCmd(&pb.BaseCommand{Type: pb.BaseCommand_AUTH_CHALLENGE.Enum(), AuthChallenge: &pb.CommandAuthChallenge{
		ServerVersion: strp(serverVersion), ProtocolVersion: &pv,
		Challenge: &pb.AuthData{AuthMethodName: strp(auth.TokenMethod), AuthData: []byte("refresh")},
	}})
}

// handleAuthResponse takes a refreshed credential; it must be for the
// same role. The lookups that follow carry it to the brokers.
func (c *clientConn) handleAuthResponse(cmd *pb.CommandAuthResponse) error {
	r := cmd.GetResponse()
	c.mu.Lock()
	c.method, c.data = r.GetAuthMethodName(), r.GetAuthData()
	c.mu.Unlock()
	if !c.s.auth.Enabled() {
		return nil
	}
	id, err := c.s.auth.Authenticate(r.GetAuthMethodName(), r.GetAuthData(), c.tlsState())
	if err == nil && id.Role != c.id.Role {
		err = fmt.Errorf("%w: a refreshed token must be for role %q, not %q", errkind.ErrAuthentication, c.id.Role, id.Role)
	}
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.id = id
	if c.timer != nil {
		c.timer.Stop()
	}
	c.awaiting = false
	c.mu.Unlock()
	c.scheduleRefresh(id.Expires)
	return nil
}

// credentials are the client's latest credentials (a backend answers its
// broker's challenges with them).
func (c *clientConn) credentials() (string, []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.method, c.data
}

// dialBackend opens a lookup connection to broker b for this client.
func (c *clientConn) dialBackend(ctx context.Context, b brokerInfo) (*backend, error) {
	nc, err := c.s.dialBroker(ctx, b)
	if err != nil {
		return nil, err
	}
	cc, err := c.brokerConnect()
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("%w: %w", errkind.ErrServiceNotReady, err)
	}
	bk := &backend{c: c, broker: b.ID, nc: nc, pending: map[uint64]chan *pb.BaseCommand{}, done: make(chan struct{})}
	if err := bk.handshake(cc, c.s.cfg.HandshakeTimeout); err != nil {
		nc.Close()
		return nil, err
	}
	go bk.readLoop()
	return bk, nil
}
