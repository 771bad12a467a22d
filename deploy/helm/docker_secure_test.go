package helm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/internal/secrets"
)

// secrets makes the federation's CAs and tokens with internal/secrets
// (what `isobar secrets create` runs) and returns each region's extra
// values: TLS from the issuers isobar-<region>-ca and
// isobar-federation-ca, and token authentication with the tokens inline.
func (d *dockerRun) secrets() (east, west string) {
	t := d.t
	d.secretsDir = filepath.Join(d.dir, "secrets")
	f, err := secrets.Ensure(d.secretsDir, []string{"us-east", "eu-west"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The clients' containers run as the image's user: let it read them.
	if err := filepath.WalkDir(d.secretsDir, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if e.IsDir() {
			mode = 0o755
		}
		return os.Chmod(path, mode)
	}); err != nil {
		t.Fatal(err)
	}
	b64 := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	values := func(region string) string {
		r := f.Regions[region]
		return fmt.Sprintf(`
tls:
  enabled: true
  regionIssuer: {name: isobar-%s-ca, kind: Issuer}
  federationIssuer: {name: isobar-federation-ca, kind: ClusterIssuer}
auth:
  enabled: true
  secretKeyBase64: %s
  proxyTokenBase64: %s
  replicatorTokenBase64: %s
`, region, b64(f.SecretKey), b64(r.ProxyToken), b64(r.ReplicatorToken))
	}
	return values("us-east"), values("eu-west")
}

// issue does cert-manager's part for r's Certificates: each one's Secret
// holds a certificate for its DNS names from the CA of the issuer it
// names, the key, and that CA as ca.crt.
func (d *dockerRun) issue(r *rendered, region string) {
	t := d.t
	if d.issued == nil {
		d.issued = map[string]map[string][]byte{}
	}
	cas := map[string]string{
		"isobar-federation-ca":     d.secretsDir,
		"isobar-" + region + "-ca": filepath.Join(d.secretsDir, region),
	}
	for n, c := range r.certificates {
		dir, ok := cas[c.Spec.IssuerRef.Name]
		if !ok {
			t.Fatalf("Certificate %s: issuer %s is not one of the test's", n, c.Spec.IssuerRef.Name)
		}
		ca, err := tls.LoadX509KeyPair(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		caCert, err := x509.ParseCertificate(ca.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial, Subject: pkix.Name{CommonName: c.Spec.CommonName},
			DNSNames:  c.Spec.DNSNames,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, ca.PrivateKey)
		if err != nil {
			t.Fatalf("Certificate %s: %v", n, err)
		}
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
		if err != nil {
			t.Fatal(err)
		}
		d.issued[c.Spec.SecretName] = map[string][]byte{
			"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			"tls.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
			"ca.crt":  caPEM,
		}
	}
	t.Logf("%s: %d certificates issued", region, len(r.certificates))
}

// secureMessages produces three messages in us-east and consumes them in
// eu-west, both over the proxies' TLS ports (reached by their Services'
// names, which their certificates name) with the superuser's token, with
// `isobar client` in containers on the network.
func (d *dockerRun) secureMessages() {
	t := d.t
	client := func(timeout time.Duration, proxy string, args ...string) (string, error) {
		a := []string{"run", "--rm", "--network", d.net, "--read-only",
			"--mount", "type=bind,readonly,src=" + d.secretsDir + ",dst=/secrets", d.image, "client"}
		a = append(a, args...)
		a = append(a, "--service-url", "pulsar+ssl://"+proxy+":6651", "--tls-trust-certs-file", "/secrets/ca.pem", "--token-file", "/secrets/superuser.token")
		return run(timeout, nil, "docker", a...)
	}
	topic := "persistent://geo/replicated/secure"
	type result struct {
		out string
		err error
	}
	consumed := make(chan result, 1)
	go func() {
		out, err := client(3*time.Minute, "eu-west-proxy", "consume", topic, "-s", "sub", "-p", "Earliest", "-n", "3")
		consumed <- result{out, err}
	}()
	var out string
	var err error
	d.poll(2*time.Minute, "produced over us-east's proxy", func() (bool, string) {
		out, err = client(time.Minute, "us-east-proxy", "produce", topic, "-m", "secret", "-n", "3")
		return err == nil, fmt.Sprint(err, ": ", out)
	})
	res := <-consumed
	if res.err != nil || strings.Count(res.out, "secret\n") < 3 {
		d.diagnose()
		t.Fatalf("isobar client consume over eu-west's proxy: %v, want three \"secret\" lines in\n%s", res.err, res.out)
	}
	t.Logf("three messages produced over us-east's proxy (TLS, token) and consumed over eu-west's")
}
