package broker

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// endRemote sends a transaction's end (END_TXN_ON_PARTITION or
// END_TXN_ON_SUBSCRIPTION, request id 1) to the broker at serviceURL,
// which owns the topic, over the Pulsar protocol as Pulsar's coordinator
// does, and waits for its answer. One connection per end: ends are rare
// next to messages. A region with authentication on is not served yet
// (a broker has no credentials of its own to present).
func (b *Broker) endRemote(ctx context.Context, serviceURL string, cmd *pb.BaseCommand) error {
	if b.cfg.Auth.AuthenticationEnabled {
		return fmt.Errorf("%w: ending a transaction on another broker's topic with authentication on is not supported yet", errkind.ErrServiceNotReady)
	}
	u, err := url.Parse(serviceURL)
	if err != nil || u.Scheme != "pulsar" || u.Host == "" {
		return fmt.Errorf("%w: owner's service URL %q is not pulsar://host:port", errkind.ErrServiceNotReady, serviceURL)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return fmt.Errorf("%w: %w", errkind.ErrServiceNotReady, err)
	}
	defer nc.Close()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	defer stop()
	pv := int32(21)
	connect := &pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{ClientVersion: strp("isobar-broker " + Version), ProtocolVersion: &pv}}
	out, err := wire.AppendCommand(nil, connect)
	if err == nil {
		out, err = wire.AppendCommand(out, cmd)
	}
	if err != nil {
		return err
	}
	if _, err := nc.Write(out); err != nil {
		return fmt.Errorf("%w: %w", errkind.ErrServiceNotReady, err)
	}
	r := bufio.NewReader(nc)
	var buf []byte
	for {
		buf, err = wire.ReadFrame(r, 0, buf)
		if err != nil {
			return fmt.Errorf("%w: reading the owner's answer: %w", errkind.ErrServiceNotReady, err)
		}
		f, err := wire.DecodeFrame(buf)
		if err != nil {
			return fmt.Errorf("%w: the owner's answer: %w", errkind.ErrServiceNotReady, err)
		}
		var code *pb.ServerError
		var msg string
		switch f.Cmd.GetType() {
		case pb.BaseCommand_CONNECTED, pb.BaseCommand_PONG:
			continue
		case pb.BaseCommand_PING:
			if pong, err := wire.AppendCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_PONG.Enum(), Pong: &pb.CommandPong{}}); err == nil {
				nc.Write(pong)
			}
			continue
		case pb.BaseCommand_ERROR:
			code, msg = f.Cmd.Error.Error, f.Cmd.Error.GetMessage()
		case pb.BaseCommand_END_TXN_ON_PARTITION_RESPONSE:
			code, msg = f.Cmd.EndTxnOnPartitionResponse.Error, f.Cmd.EndTxnOnPartitionResponse.GetMessage()
		case pb.BaseCommand_END_TXN_ON_SUBSCRIPTION_RESPONSE:
			code, msg = f.Cmd.EndTxnOnSubscriptionResponse.Error, f.Cmd.EndTxnOnSubscriptionResponse.GetMessage()
		default:
			continue
		}
		if code == nil {
			return nil
		}
		return fmt.Errorf("%w: %s (from the topic's owner)", wire.ErrorFor(*code), msg)
	}
}
