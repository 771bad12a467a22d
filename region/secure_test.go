package region_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/internal/natsembed"
	"github.com/isobar-mq/isobar/internal/secrets"
	"github.com/isobar-mq/isobar/internal/tlsfiles"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/region"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// TestSecureFederation: a federation started with secrets (what `isobar
// dev --secure` runs) replicates between regions with TLS and
// authentication on every link; the plaintext broker port refuses,
// naming the TLS URL; and each region's internal links (etcd, bookies,
// NATS) refuse another region's credentials and none, as its brokers
// refuse another region's replicator role.
func TestSecureFederation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files, err := secrets.Ensure(dir+"/secrets", []string{"r0", "r1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := startFederationWith(t, 2, nil, region.Deps{}, func(c *region.FederationConfig) { c.Secrets = &files })
	e0, e1 := f.Regions[0].Endpoints(), f.Regions[1].Endpoints()
	if !strings.HasPrefix(e0.ServiceURLTLS, "pulsar+ssl://") || !strings.HasPrefix(e0.MetadataURL, "https://") {
		t.Fatalf("endpoints %+v: want TLS URLs", e0)
	}
	for _, g := range f.GlobalEndpoints() {
		if !strings.HasPrefix(g, "https://") {
			t.Fatalf("global store endpoint %s, want https://", g)
		}
	}
	token, err := os.ReadFile(files.SuperUserToken)
	if err != nil {
		t.Fatal(err)
	}
	client := func(url string, tok string, opTimeout time.Duration) pulsar.Client {
		t.Helper()
		opts := pulsar.ClientOptions{URL: url, TLSTrustCertsFilePath: files.CA, OperationTimeout: opTimeout,
			ConnectionTimeout: 5 * time.Second, Logger: quietLogger()}
		if tok != "" {
			opts.Authentication = pulsar.NewAuthenticationToken(tok)
		}
		c, err := pulsar.NewClient(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	root := strings.TrimSpace(string(token))

	t.Run("replication over TLS with tokens", func(t *testing.T) {
		const tp = "persistent://acme/geo/secure"
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cons, err := client(e1.ServiceURLTLS, root, 20*time.Second).Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		p, err := client(e0.ServiceURLTLS, root, 20*time.Second).CreateProducer(pulsar.ProducerOptions{Topic: tp})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		for i := range 20 {
			if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 20 {
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatalf("message %d in r1: %v", i, err)
			}
			if string(m.Payload()) != fmt.Sprint(i) || m.GetReplicatedFrom() != "r0" {
				t.Fatalf("message %d is %q from %q", i, m.Payload(), m.GetReplicatedFrom())
			}
			cons.Ack(m)
		}
	})

	t.Run("plaintext ports refuse", func(t *testing.T) {
		c := client(e0.ServiceURL, root, 3*time.Second)
		_, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://acme/geo/plain", SendTimeout: 3 * time.Second})
		if err == nil {
			t.Fatal("the plaintext Pulsar port served a producer")
		}
		// What it says, on the wire: an error naming the TLS URL.
		nc, err := net.DialTimeout("tcp", strings.TrimPrefix(e0.ServiceURL, "pulsar://"), 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		connect, _ := wire.AppendCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{ClientVersion: proto.String("test"), ProtocolVersion: proto.Int32(21)}})
		nc.Write(connect)
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		frame, err := wire.ReadFrame(nc, 1<<20, nil)
		if err != nil {
			t.Fatal(err)
		}
		fr, err := wire.DecodeFrame(frame)
		if err != nil || fr.Cmd.GetError() == nil || fr.Cmd.GetError().GetError() != pb.ServerError_AuthenticationError ||
			!strings.Contains(fr.Cmd.GetError().GetMessage(), "serves only TLS: connect to "+e0.ServiceURLTLS) {
			t.Fatalf("plaintext CONNECT answered %v %v", fr.Cmd, err)
		}
		if err := probeStatus(e0.WebServiceURL+"/admin/v2/tenants", 403); err != nil {
			t.Error(err)
		}
		if err := probeStatus(e0.WebServiceURL+"/readyz", 200); err != nil {
			t.Error(err)
		}
	})

	t.Run("a client without a token is refused", func(t *testing.T) {
		_, err := client(e0.ServiceURLTLS, "", 3*time.Second).CreateProducer(pulsar.ProducerOptions{Topic: "persistent://acme/geo/anon", SendTimeout: 3 * time.Second})
		if err == nil {
			t.Fatal("served without a token")
		}
	})

	// Region r0's credentials (and none) at region r1's internal ports.
	r0, r1 := files.Regions["r0"], files.Regions["r1"]
	tlsWith := func(pair *secrets.Pair, trust string) *tls.Config {
		pool := x509.NewCertPool()
		b, _ := os.ReadFile(trust)
		pool.AppendCertsFromPEM(b)
		tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1"}
		if pair != nil {
			c, err := tls.LoadX509KeyPair(pair.Cert, pair.Key)
			if err != nil {
				t.Fatal(err)
			}
			// Sent even though it does not chain to a CA the server
			// names (Go's client would otherwise send none).
			tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }
		}
		return tc
	}
	// handshake reports the server's verdict on our certificate (TLS 1.3
	// sends it after the handshake, on the first read).
	handshake := func(addr string, tc *tls.Config) error {
		c, err := tls.Dial("tcp", addr, tc)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = c.Read(make([]byte, 1))
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil // accepted: the server waits for our request
		}
		return err
	}
	mine, theirs := r1.Certs["bookie"], r0.Certs["broker"]
	t.Run("bookie refuses another region's certificate", func(t *testing.T) {
		addr := e1.Bookies[0]
		if err := handshake(addr, tlsWith(&mine, r1.CA)); err != nil {
			t.Fatalf("r1's own certificate: %v", err)
		}
		for name, tc := range map[string]struct {
			cfg  *tls.Config
			says string
		}{"r0's certificate": {tlsWith(&theirs, r1.CA), "unknown certificate authority"}, "no certificate": {tlsWith(nil, r1.CA), "certificate required"}} {
			if err := handshake(addr, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%s: %v, want refused with %q", name, err, tc.says)
			}
		}
	})
	t.Run("etcd refuses another region's certificate", func(t *testing.T) {
		connect := func(c tlsfiles.ClientConfig) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := metastore.Connect(ctx, metastore.Config{Endpoints: []string{e1.MetadataURL}, DialTimeout: 2 * time.Second, TLS: c})
			if err == nil {
				s.Close()
			}
			return err
		}
		if err := connect(tlsfiles.ClientConfig{TrustCertsFile: r1.CA, CertFile: r1.Certs["broker"].Cert, KeyFile: r1.Certs["broker"].Key}); err != nil {
			t.Fatalf("r1's own certificate: %v", err)
		}
		err := connect(tlsfiles.ClientConfig{TrustCertsFile: r1.CA, CertFile: theirs.Cert, KeyFile: theirs.Key})
		if err == nil || !strings.Contains(err.Error(), "unknown certificate authority") {
			t.Errorf("r0's certificate: %v, want refused for its CA", err)
		}
		if err := connect(tlsfiles.ClientConfig{TrustCertsFile: r1.CA}); err == nil {
			t.Error("no certificate: accepted")
		}
	})
	t.Run("NATS refuses another region's certificate", func(t *testing.T) {
		dial := func(c tlsfiles.ClientConfig) error {
			opts, err := natsembed.ClientOptions(c)
			if err != nil {
				t.Fatal(err)
			}
			nc, err := nats.Connect(e1.NATSURL, append(opts, nats.Timeout(3*time.Second))...)
			if err == nil {
				err = nc.Flush()
				nc.Close()
			}
			return err
		}
		if err := dial(tlsfiles.ClientConfig{TrustCertsFile: r1.CA, CertFile: r1.Certs["replicator"].Cert, KeyFile: r1.Certs["replicator"].Key}); err != nil {
			t.Fatalf("r1's own certificate: %v", err)
		}
		if err := dial(tlsfiles.ClientConfig{TrustCertsFile: r1.CA, CertFile: r0.Certs["replicator"].Cert, KeyFile: r0.Certs["replicator"].Key}); err == nil {
			t.Error("r0's certificate: accepted")
		}
		if err := dial(tlsfiles.ClientConfig{TrustCertsFile: r1.CA}); err == nil {
			t.Error("no certificate: accepted")
		}
	})
	t.Run("brokers refuse another region's replicator", func(t *testing.T) {
		tok, _ := os.ReadFile(r0.ReplicatorToken)
		c := client(e1.ServiceURLTLS, strings.TrimSpace(string(tok)), 3*time.Second)
		_, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://acme/geo/pose", Name: replication.Prefix + "r0-pose", SendTimeout: 3 * time.Second})
		if err == nil {
			t.Fatal("r1 accepted a replicator producer with r0's replicator token")
		}
		t.Logf("r0's replicator token at r1: %v", err)
	})
}
