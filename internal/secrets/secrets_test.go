package secrets

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/isobar-mq/isobar/auth"
)

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// verifies checks that the certificate in pair chains to the CA in caFile.
func verifies(t *testing.T, pair Pair, caFile string) error {
	t.Helper()
	c, err := tls.LoadX509KeyPair(pair.Cert, pair.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(c.Certificate[0])
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(read(t, caFile))
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err
}

func TestEnsureMakesAndReuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secrets")
	f, err := Ensure(dir, []string{"us-east", "eu-west"}, []string{"host-a"})
	if err != nil {
		t.Fatal(err)
	}
	us, eu := f.Regions["us-east"], f.Regions["eu-west"]
	// Internal certificates chain to their region's CA only.
	if err := verifies(t, us.Certs["bookie"], us.CA); err != nil {
		t.Errorf("us-east bookie vs us-east CA: %v", err)
	}
	if err := verifies(t, eu.Certs["bookie"], us.CA); err == nil {
		t.Error("eu-west's bookie certificate chains to us-east's CA")
	}
	for _, p := range []Pair{us.Public, us.Federation, eu.Federation, f.Global} {
		if err := verifies(t, p, f.CA); err != nil {
			t.Errorf("%s vs the federation CA: %v", p.Cert, err)
		}
	}
	if info, err := os.Stat(us.Certs["etcd"].Key); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v %v, want 0600", info.Mode(), err)
	}
	// Tokens: signed with secret.key, for their roles.
	v, err := auth.NewVerifier(auth.TokenConfig{SecretKey: f.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	for file, role := range map[string]string{f.SuperUserToken: SuperUser, us.ReplicatorToken: "replicator-us-east", eu.ProxyToken: "proxy-eu-west"} {
		c, err := v.Verify(strings.TrimSpace(string(read(t, file))))
		if err != nil || c.Role != role {
			t.Errorf("%s: %+v %v, want role %s", file, c, err, role)
		}
	}
	// A second start reuses every file.
	before := map[string][]byte{}
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			before[p] = read(t, p)
		}
		return nil
	})
	if _, err := Ensure(dir, []string{"us-east", "eu-west"}, []string{"host-a"}); err != nil {
		t.Fatal(err)
	}
	for p, b := range before {
		if !bytes.Equal(b, read(t, p)) {
			t.Errorf("%s changed on reuse", p)
		}
	}
	// A region CA made again reissues that region's certificates.
	os.Remove(us.CA)
	f2, err := Ensure(dir, []string{"us-east", "eu-west"}, []string{"host-a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := verifies(t, f2.Regions["us-east"].Certs["bookie"], f2.Regions["us-east"].CA); err != nil {
		t.Errorf("after a new region CA: %v", err)
	}
	if !bytes.Equal(before[eu.Certs["bookie"].Cert], read(t, eu.Certs["bookie"].Cert)) {
		t.Error("another region's certificate was reissued")
	}
	// A host added later: every server certificate is issued again for it.
	f3, err := Ensure(dir, []string{"us-east", "eu-west"}, []string{"host-a", "host-b"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Pair{f3.Regions["eu-west"].Certs["proxy"], f3.Regions["eu-west"].Public, f3.Global} {
		if err := verifiesHost(t, p, "host-b"); err != nil {
			t.Errorf("%s after host-b was added: %v", p.Cert, err)
		}
	}
}

// verifiesHost checks that pair's certificate is valid for host.
func verifiesHost(t *testing.T, pair Pair, host string) error {
	t.Helper()
	c, err := tls.LoadX509KeyPair(pair.Cert, pair.Key)
	if err != nil {
		return err
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return err
	}
	return leaf.VerifyHostname(host)
}

func TestEnsureRefusesDamagedFiles(t *testing.T) {
	dir := t.TempDir()
	if _, err := Ensure(dir, []string{"r"}, nil); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "ca-key.pem"), []byte("junk"), 0o600)
	_, err := Ensure(dir, []string{"r"}, nil)
	if err == nil || !strings.Contains(err.Error(), "delete them") {
		t.Fatalf("damaged CA key: %v, want an error saying what to do", err)
	}
}
