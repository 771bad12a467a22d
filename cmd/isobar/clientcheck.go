package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// The client library (pulsar-client-go) retries every failure to connect
// or look a topic up until its operation timeout, logging a warning per
// attempt and then returning "context deadline exceeded" or "connection
// error": the broker's reason (a refused token, a TLS-only port, a
// missing namespace) is lost. So `isobar client` first asks the broker
// itself, over one connection made as the library will make it
// (CONNECT with the same credentials, then the topic's partitioned
// metadata and its lookup), and fails at once with the broker's reason
// and a hint when the broker refuses.

// checkTimeout bounds the check; the command's --timeout may be shorter.
const checkTimeout = 10 * time.Second

// clientError is a failure to reach or use the brokers, said for the
// user: what happened, with the broker's own words when it answered, and
// what to try.
type clientError struct {
	reason string
	hint   string // "" when there is nothing to suggest
}

func (e *clientError) Error() string {
	if e.hint == "" {
		return e.reason
	}
	return e.reason + "\nhint: " + e.hint
}

// checkBroker connects to c's service URL as the client library will and
// asks for topic's partitioned metadata and lookup; nil when the broker
// answers them, else a *clientError. With several hosts in the URL, a
// host that cannot be reached is skipped for the next.
func checkBroker(ctx context.Context, c connFlags, topic string) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	u, err := url.Parse(c.serviceURL)
	if err != nil {
		return usageError{fmt.Errorf("--service-url: %w", err)}
	}
	useTLS := u.Scheme == "pulsar+ssl"
	var token string
	if c.tokenFile != "" {
		raw, err := os.ReadFile(c.tokenFile)
		if err != nil {
			return usageError{fmt.Errorf("--token-file: %w", err)}
		}
		token = strings.TrimSpace(string(raw))
	}
	var roots *x509.CertPool
	if c.trustCerts != "" {
		pem, err := os.ReadFile(c.trustCerts)
		if err != nil {
			return usageError{fmt.Errorf("--tls-trust-certs-file: %w", err)}
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return usageError{fmt.Errorf("--tls-trust-certs-file: %s holds no PEM certificate", c.trustCerts)}
		}
	}
	p := prober{c: c, token: token, roots: roots, useTLS: useTLS, budget: checkTimeout}
	if dl, ok := ctx.Deadline(); ok {
		p.budget = time.Until(dl).Round(time.Millisecond)
	}
	var last error
	for _, addr := range strings.Split(strings.TrimSuffix(u.Host, "/"), ",") {
		err := p.check(ctx, addr, topic)
		var unreachable *unreachableError
		if !errors.As(err, &unreachable) {
			return err
		}
		last = err
	}
	return last
}

// prober checks one broker address.
type prober struct {
	c      connFlags
	token  string
	roots  *x509.CertPool // nil: the system's
	useTLS bool
	budget time.Duration // the time the check has
}

// unreachableError is a clientError for an address nothing answered at:
// the next address of the service URL may answer.
type unreachableError struct{ clientError }

func (p prober) check(ctx context.Context, addr, topic string) error {
	nc, err := p.dial(ctx, addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	defer stop()
	connect := &pb.CommandConnect{ClientVersion: strp("isobar " + version()), ProtocolVersion: i32p(21)}
	if p.token != "" {
		connect.AuthMethodName, connect.AuthData = strp("token"), []byte(p.token)
	}
	reply, err := roundTrip(nc, &pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: connect})
	if err != nil {
		if ctx.Err() != nil {
			return p.timedOut(addr, "answer CONNECT")
		}
		if !p.useTLS && speaksTLS(ctx, addr) {
			return &clientError{
				reason: fmt.Sprintf("%s speaks TLS, and this client connected in plain text (%s)", addr, p.c.serviceURL),
				hint:   fmt.Sprintf("use --service-url pulsar+ssl://%s with --tls-trust-certs-file CA.pem", addr),
			}
		}
		return &clientError{reason: fmt.Sprintf("%s closed the connection without answering CONNECT: %v", addr, err),
			hint: "is it a Pulsar broker's port? (--service-url)"}
	}
	switch reply.GetType() {
	case pb.BaseCommand_CONNECTED:
	case pb.BaseCommand_ERROR:
		return p.refused(addr, "refused the connection", reply.Error.GetError(), reply.Error.GetMessage())
	default:
		return &clientError{reason: fmt.Sprintf("%s answered CONNECT with %v", addr, reply.GetType()), hint: "is it a Pulsar broker's port? (--service-url)"}
	}
	pm, err := roundTrip(nc, &pb.BaseCommand{Type: pb.BaseCommand_PARTITIONED_METADATA.Enum(), PartitionMetadata: &pb.CommandPartitionedTopicMetadata{
		Topic: strp(topic), RequestId: u64p(1)}})
	if err != nil {
		return p.lost(ctx, addr, err)
	}
	if r := pm.GetPartitionMetadataResponse(); r == nil {
		return p.answered(addr, pm)
	} else if r.GetResponse() == pb.CommandPartitionedTopicMetadataResponse_Failed {
		return p.refused(addr, "refused "+topic, r.GetError(), r.GetMessage())
	} else if r.GetPartitions() > 0 {
		topic += "-partition-0"
	}
	lk, err := roundTrip(nc, &pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{
		Topic: strp(topic), RequestId: u64p(2)}})
	if err != nil {
		return p.lost(ctx, addr, err)
	}
	if r := lk.GetLookupTopicResponse(); r == nil {
		return p.answered(addr, lk)
	} else if r.GetResponse() == pb.CommandLookupTopicResponse_Failed {
		return p.refused(addr, "refused "+topic, r.GetError(), r.GetMessage())
	}
	return nil
}

// dial connects to addr, over TLS when the service URL says so; its
// errors say why nothing could be reached.
func (p prober) dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	switch {
	case err == nil:
	case errors.Is(err, syscall.ECONNREFUSED):
		return nil, &unreachableError{clientError{reason: fmt.Sprintf("nothing listens at %s (connection refused)", addr),
			hint: "is the broker running, and is --service-url right? (a broker's Pulsar port is 6650 by default, its TLS port 6651)"}}
	case ctx.Err() != nil:
		return nil, &unreachableError{*p.timedOut(addr, "accept a connection")}
	default:
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) {
			return nil, &unreachableError{clientError{reason: fmt.Sprintf("cannot resolve %s: %v", addr, dnsErr), hint: "check the host name in --service-url"}}
		}
		return nil, &unreachableError{clientError{reason: fmt.Sprintf("cannot connect to %s: %v", addr, err)}}
	}
	if !p.useTLS {
		return nc, nil
	}
	host, _, _ := net.SplitHostPort(addr)
	tc := tls.Client(nc, &tls.Config{ServerName: host, RootCAs: p.roots, MinVersion: tls.VersionTLS12})
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, p.handshakeFailed(ctx, addr, err)
	}
	return tc, nil
}

// handshakeFailed says why the TLS handshake with addr failed.
func (p prober) handshakeFailed(ctx context.Context, addr string, err error) error {
	var rh tls.RecordHeaderError
	var unknownCA x509.UnknownAuthorityError
	var badHost x509.HostnameError
	var badCert *tls.CertificateVerificationError
	switch {
	case errors.As(err, &rh):
		return &clientError{
			reason: fmt.Sprintf("%s does not speak TLS: it answered the TLS handshake in plain text", addr),
			hint:   fmt.Sprintf("use --service-url pulsar://%s, or the broker's TLS port (6651 by default) with pulsar+ssl://", addr),
		}
	case errors.As(err, &unknownCA):
		hint := "pass the CA that signed the broker's certificate with --tls-trust-certs-file FILE (env ISOBAR_TLS_TRUST_CERTS_FILE)"
		if p.c.trustCerts != "" {
			hint = fmt.Sprintf("the CA in %s did not sign it: pass the broker's CA with --tls-trust-certs-file", p.c.trustCerts)
		}
		return &clientError{reason: fmt.Sprintf("%s's certificate is not signed by a CA this client trusts: %v", addr, err), hint: hint}
	case errors.As(err, &badHost):
		return &clientError{reason: fmt.Sprintf("%s's certificate is not for that name: %v", addr, err), hint: "connect by a name or address the certificate lists"}
	case errors.As(err, &badCert):
		return &clientError{reason: fmt.Sprintf("%s's certificate is refused: %v", addr, err)}
	case ctx.Err() != nil:
		return p.timedOut(addr, "complete the TLS handshake")
	}
	return &clientError{reason: fmt.Sprintf("TLS handshake with %s failed: %v", addr, err),
		hint: fmt.Sprintf("if %s serves plain text, use --service-url pulsar://%s", addr, addr)}
}

// speaksTLS reports whether addr completes a TLS handshake (whoever
// signed its certificate): a plaintext CONNECT that got no answer went to
// a TLS port.
func speaksTLS(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} // only to see whether it speaks TLS; nothing is sent
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	nc.Close()
	return true
}

// refused is the error for the broker at addr refusing a request with
// code and msg, with a hint for the codes a user can do something about.
func (p prober) refused(addr, what string, code pb.ServerError, msg string) error {
	e := &clientError{reason: fmt.Sprintf("broker %s %s: %s: %s", addr, what, code, msg)}
	switch code {
	case pb.ServerError_AuthenticationError:
		switch {
		case strings.Contains(msg, "pulsar+ssl://"):
			u := msg[strings.Index(msg, "pulsar+ssl://"):]
			if i := strings.IndexAny(u, " ;,)"); i > 0 {
				u = u[:i]
			}
			e.hint = fmt.Sprintf("use --service-url %s with --tls-trust-certs-file CA.pem", u)
		case p.token == "":
			e.hint = "pass a token with --token-file FILE (env ISOBAR_TOKEN_FILE)"
		default:
			e.hint = fmt.Sprintf("the token in %s was refused: check that it is current and made with the broker's key (isobar tokens create)", p.c.tokenFile)
		}
	case pb.ServerError_AuthorizationError:
		e.hint = "the token's role needs permission: isobar admin namespaces grant-permission, or a token of another role (--token-file)"
	case pb.ServerError_InvalidTopicName:
		e.hint = "a topic is name, tenant/namespace/name or persistent://tenant/namespace/name, each part of letters, digits and _-=:."
	case pb.ServerError_TopicNotFound:
		switch {
		case strings.Contains(msg, "tenant "):
			e.hint = "create the tenant first (isobar admin tenants create), then its namespace (isobar admin namespaces create)"
		case strings.Contains(msg, "namespace "):
			e.hint = "create the namespace first (isobar admin namespaces create)"
		}
	}
	return e
}

func (p prober) timedOut(addr, what string) *clientError {
	return &clientError{reason: fmt.Sprintf("%s did not %s within %v", addr, what, p.budget),
		hint: "check the host and port in --service-url, and that no firewall drops the connection"}
}

// lost is the error for a connection lost after CONNECT.
func (p prober) lost(ctx context.Context, addr string, err error) error {
	if ctx.Err() != nil {
		return p.timedOut(addr, "answer")
	}
	return &clientError{reason: fmt.Sprintf("broker %s closed the connection: %v", addr, err)}
}

// answered is the error for an answer of the wrong type.
func (p prober) answered(addr string, cmd *pb.BaseCommand) error {
	if cmd.GetType() == pb.BaseCommand_ERROR {
		return p.refused(addr, "refused the request", cmd.Error.GetError(), cmd.Error.GetMessage())
	}
	return &clientError{reason: fmt.Sprintf("broker %s answered with %v", addr, cmd.GetType())}
}

// roundTrip sends cmd on nc and returns the next command the broker
// sends that is not a PING (which it answers).
func roundTrip(nc net.Conn, cmd *pb.BaseCommand) (*pb.BaseCommand, error) {
	f, err := wire.AppendCommand(nil, cmd)
	if err != nil {
		return nil, err
	}
	if _, err := nc.Write(f); err != nil {
		return nil, err
	}
	for {
		raw, err := wire.ReadFrame(nc, wire.DefaultMaxFrameSize, nil)
		if err != nil {
			return nil, err
		}
		fr, err := wire.DecodeFrame(raw)
		if err != nil {
			return nil, err
		}
		if fr.Cmd.GetType() != pb.BaseCommand_PING {
			return fr.Cmd, nil
		}
		pong, _ := wire.AppendCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_PONG.Enum(), Pong: &pb.CommandPong{}})
		if _, err := nc.Write(pong); err != nil {
			return nil, err
		}
	}
}

func strp(s string) *string { return &s }
func i32p(v int32) *int32   { return &v }
func u64p(v uint64) *uint64 { return &v }
