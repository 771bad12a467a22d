package region_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/auth"
	"github.com/isobar-mq/isobar/internal/tlsfiles"
	"github.com/isobar-mq/isobar/region"
)

// BenchmarkSecureProduce measures produce throughput (1 KiB messages,
// batching on, one producer) against one region (3 bookies, 1 broker)
// over plaintext without authentication and over TLS with token
// authentication and authorization, alternating the two in the same run
// on fresh regions, and reports the median per-round ratio (goal: TLS and
// tokens at least 0.85 of plaintext):
//
//	go test -run '^$' -bench BenchmarkSecureProduce -benchtime 1x -timeout 15m ./region/
func BenchmarkSecureProduce(b *testing.B) {
	if testing.Short() {
		b.Skip("skipped with -short")
	}
	const rounds = 5
	const n = 50_000
	pool := benchPayloads(benchPoolSize, benchPayloadSize, 3)
	plains, secures, ratios := pairedRounds(b, rounds, "plaintext", "TLS+token",
		func(round int) float64 { return secureRound(b, false, pool, n, round) },
		func(round int) float64 { return secureRound(b, true, pool, n, round) })
	b.ReportMetric(median(plains), "plain-msg/s")
	b.ReportMetric(median(secures), "secure-msg/s")
	b.ReportMetric(median(ratios), "secure/plain")
	b.Logf("median ratio %.3f (goal >= 0.85); medians plaintext %.0f, TLS+token %.0f msg/s", median(ratios), median(plains), median(secures))
}

func secureRound(b *testing.B, secure bool, pool [][]byte, n, round int) float64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := b.TempDir()
	cfg := region.Config{Name: "sec", DataDir: filepath.Join(dir, "data"), Bookies: 3, Brokers: 1}
	opts := pulsar.ClientOptions{OperationTimeout: 30 * time.Second, Logger: quietLogger()}
	if secure {
		now := time.Now()
		ca, err := tlsfiles.NewCA("bench CA", now.Add(-time.Hour), now.Add(time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		srv, err := tlsfiles.Issue(ca, "broker", []string{"127.0.0.1"}, false, now.Add(-time.Hour), now.Add(time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		secret := auth.NewSecretKey()
		for name, data := range map[string][]byte{"ca.pem": ca.Cert, "cert.pem": srv.Cert, "key.pem": srv.Key, "secret.key": secret} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				b.Fatal(err)
			}
		}
		cfg.Broker.TLS = tlsfiles.Config{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem")}
		cfg.Broker.TLSListenAddr, cfg.Broker.HTTPSListenAddr = "127.0.0.1:0", "127.0.0.1:0"
		cfg.Broker.Auth = auth.Config{AuthenticationEnabled: true, AuthorizationEnabled: true,
			Token: auth.TokenConfig{SecretKey: filepath.Join(dir, "secret.key")}, SuperUserRoles: []string{"bench"}}
		tok, err := auth.Sign(auth.HS256, secret, "bench", time.Time{})
		if err != nil {
			b.Fatal(err)
		}
		opts.TLSTrustCertsFilePath = filepath.Join(dir, "ca.pem")
		opts.Authentication = pulsar.NewAuthenticationToken(tok)
	}
	r, err := region.Start(ctx, cfg, region.Deps{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		r.Shutdown(sctx)
	}()
	opts.URL = r.Endpoints().ServiceURL
	if secure {
		opts.URL = r.Endpoints().Brokers[0].ServiceURLTLS
	}
	c, err := pulsar.NewClient(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	p := benchProducer(b, c, fmt.Sprintf("persistent://public/default/sec-%d", round))
	defer p.Close()
	benchSend(b, p, pool, 0, 1000) // warm up
	start := time.Now()
	benchSend(b, p, pool, 0, n)
	return float64(n) / time.Since(start).Seconds()
}
