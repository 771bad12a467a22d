package broker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/sirupsen/logrus"

	"github.com/isobar-mq/isobar/auth"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire/pb"
)

// authEnv is a broker that requires tokens signed with secret (modify
// changes its auth settings: turns authorization on, say).
type authEnv struct {
	*env
	secret []byte
}

func startAuthEnv(t *testing.T, modify ...func(*auth.Config)) *authEnv {
	t.Helper()
	secret := auth.NewSecretKey()
	keyFile := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(keyFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	e := startEnv(t, func(s *setup) {
		s.Config.Auth = auth.Config{
			AuthenticationEnabled: true,
			Token:                 auth.TokenConfig{SecretKey: keyFile},
			SuperUserRoles:        []string{"admin"},
			ReplicatorRoles:       []string{"repl"},
		}
		for _, m := range modify {
			m(&s.Config.Auth)
		}
	})
	return &authEnv{env: e, secret: secret}
}

func (a *authEnv) token(t *testing.T, role string, expires time.Time) string {
	t.Helper()
	tok, err := auth.Sign(auth.HS256, a.secret, role, expires)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// tokenClient is a pulsar-client-go client authenticating with tok.
func (a *authEnv) tokenClient(t *testing.T, tok string, opTimeout time.Duration) pulsar.Client {
	t.Helper()
	l := logrus.New()
	l.SetLevel(logrus.ErrorLevel)
	opts := pulsar.ClientOptions{
		URL: a.url, OperationTimeout: opTimeout, ConnectionTimeout: 5 * time.Second,
		Logger: plog.NewLoggerWithLogrus(l),
	}
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

// TestTokenAuthenticationWithPulsarClient: pulsar-client-go with a valid
// token produces and consumes; without one, or with a bad one, it cannot
// create a producer.
func TestTokenAuthenticationWithPulsarClient(t *testing.T) {
	a := startAuthEnv(t)
	ctx := ctxT(t)
	c := a.tokenClient(t, a.token(t, "app", time.Now().Add(time.Hour)), 15*time.Second)
	const topicName = "persistent://public/default/auth-ok"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topicName, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topicName})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	m, err := cons.Receive(ctx)
	if err != nil || string(m.Payload()) != "hello" {
		t.Fatalf("receive: %v", err)
	}

	other := auth.NewSecretKey()
	forged, _ := auth.Sign(auth.HS256, other, "app", time.Time{})
	for name, tok := range map[string]string{
		"none":      "",
		"forged":    forged,
		"expired":   a.token(t, "app", time.Now().Add(-time.Minute)),
		"malformed": "not.a.token",
	} {
		t.Run(name, func(t *testing.T) {
			c := a.tokenClient(t, tok, 2*time.Second)
			if p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/auth-refused-" + name}); err == nil {
				p.Close()
				t.Fatal("a producer was created")
			}
		})
	}
	// Nothing was created by the refused clients.
	topics, err := a.b.AdminAPI().Topics.ListTopics(ctx, "public/default", topic.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range topics {
		if strings.Contains(tp, "auth-refused") {
			t.Errorf("refused client created %s", tp)
		}
	}
}

func connectCmd(version, method string, data []byte) *pb.BaseCommand {
	pv := int32(21)
	c := &pb.CommandConnect{ClientVersion: &version, ProtocolVersion: &pv}
	if method != "" {
		c.AuthMethodName, c.AuthData = &method, data
	}
	return &pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: c}
}

// expectRefused checks that the broker sends an ERROR with code, saying
// says, and closes the connection.
func expectRefused(t *testing.T, r *rawConn, code pb.ServerError, says string) {
	t.Helper()
	e := errorOf(t, r.expectClosed())
	if e.GetError() != code || !strings.Contains(e.GetMessage(), says) {
		t.Fatalf("got %v, want ERROR %v saying %q", e, code, says)
	}
}

// TestConnectRefusals: each bad CONNECT gets an ERROR naming the reason,
// then the connection closes; the broker keeps serving others.
func TestConnectRefusals(t *testing.T) {
	a := startAuthEnv(t)
	for _, c := range []struct {
		name    string
		connect *pb.BaseCommand
		code    pb.ServerError
		says    string
	}{
		{"no credentials", connectCmd("test", "", nil), pb.ServerError_AuthenticationError, "requires auth method token"},
		{"other method", connectCmd("test", "tls", nil), pb.ServerError_AuthenticationError, `"tls" is not accepted; this server requires token`},
		{"expired", connectCmd("test", "token", []byte(a.token(t, "app", time.Now().Add(-time.Second)))), pb.ServerError_AuthenticationError, "token expired"},
		{"garbage", connectCmd("test", "token", []byte("garbage")), pb.ServerError_AuthenticationError, "malformed"},
		{"client posing as replicator", connectCmd(replication.ClientVersion, "token", []byte(a.token(t, "app", time.Time{}))), pb.ServerError_AuthorizationError, "not a replicator role"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := dialRaw(t, a.url, false)
			r.send(c.connect)
			expectRefused(t, r, c.code, c.says)
		})
	}
	// The replicator's role connects as a replicator.
	r := dialRaw(t, a.url, false)
	r.send(connectCmd(replication.ClientVersion, "token", []byte(a.token(t, "repl", time.Time{}))))
	if cmd := r.recv().Cmd; cmd.GetType() != pb.BaseCommand_CONNECTED {
		t.Fatalf("replicator role: %v", cmd)
	}
}

// TestReplicatorProducerNeedsReplicatorRole: a client that is not a
// replicator cannot open a replicator producer (and so cannot write
// replicated entries).
func TestReplicatorProducerNeedsReplicatorRole(t *testing.T) {
	a := startAuthEnv(t)
	r := dialRaw(t, a.url, false)
	r.send(connectCmd("test", "token", []byte(a.token(t, "app", time.Time{}))))
	if cmd := r.recv().Cmd; cmd.GetType() != pb.BaseCommand_CONNECTED {
		t.Fatal(cmd)
	}
	topicName, pname := "persistent://public/default/posing", replication.Prefix+"other-region"
	id, pid := uint64(1), uint64(1)
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
		Topic: &topicName, ProducerId: &pid, RequestId: &id, ProducerName: &pname,
	}})
	if e := r.recv().Cmd.GetError(); e.GetError() != pb.ServerError_AuthorizationError || !strings.Contains(e.GetMessage(), "not a replicator role") {
		t.Fatalf("got %v, want AuthorizationError", e)
	}
	r.alive()
}

// TestExpiringTokenIsChallenged: when a connection's token expires the
// broker sends AUTH_CHALLENGE; a fresh token for the same role keeps the
// connection, one for another role closes it.
func TestExpiringTokenIsChallenged(t *testing.T) {
	a := startAuthEnv(t)
	for _, c := range []struct {
		name  string
		role  string
		keeps bool
	}{{"same role", "app", true}, {"other role", "intruder", false}} {
		t.Run(c.name, func(t *testing.T) {
			r := dialRaw(t, a.url, false)
			r.send(connectCmd("test", "token", []byte(a.token(t, "app", time.Now().Add(1500*time.Millisecond)))))
			if cmd := r.recv().Cmd; cmd.GetType() != pb.BaseCommand_CONNECTED {
				t.Fatal(cmd)
			}
			ch := r.recv().Cmd
			if ch.GetType() != pb.BaseCommand_AUTH_CHALLENGE || ch.AuthChallenge.GetChallenge().GetAuthMethodName() != "token" {
				t.Fatalf("got %v, want AUTH_CHALLENGE", ch)
			}
			method := "token"
			r.send(&pb.BaseCommand{Type: pb.BaseCommand_AUTH_RESPONSE.Enum(), AuthResponse: &pb.CommandAuthResponse{
				Response: &pb.AuthData{AuthMethodName: &method, AuthData: []byte(a.token(t, c.role, time.Now().Add(time.Hour)))},
			}})
			if !c.keeps {
				expectRefused(t, r, pb.ServerError_AuthenticationError, "must be for role")
				return
			}
			r.alive()
		})
	}
}
