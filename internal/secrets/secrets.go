// Package secrets makes the certificates, signing key and tokens of a
// secure federation (`isobar dev --secure`, `isobar standalone --secure`)
// under one directory, and reuses them on the next start. It is the
// one place that lays them out; package region applies them.
//
// Layout (every file PEM unless said otherwise; keys are 0600):
//
//	ca.pem, ca-key.pem                 the federation CA: brokers' TLS
//	                                   listeners, the global store, NATS
//	                                   gateways (clients trust ca.pem)
//	secret.key                         the token signing key (HS256, raw)
//	superuser.token                    a token for role "admin" (superuser)
//	global/server.pem, -key.pem        the global store's certificate
//	<region>/ca.pem, ca-key.pem        the region's own CA: its internal
//	                                   links (etcd, bookies, NATS clients)
//	<region>/<kind>.pem, -key.pem      kind etcd, bookie, broker, nats,
//	                                   replicator, proxy: the component's
//	                                   certificate from the region CA
//	                                   (server and client use)
//	<region>/public.pem, -key.pem      the brokers' TLS listener
//	                                   certificate, from the federation CA
//	<region>/federation.pem, -key.pem  the region's certificate toward the
//	                                   other regions (NATS gateway, global
//	                                   store client), from the federation CA
//	<region>/replicator.token          a token for role replicator-<region>
//	<region>/proxy.token               a token for role proxy-<region>, the
//	                                   region's proxies toward its brokers
//
// Every server certificate is valid for the same host names (Ensure's
// hosts); one that does not cover them all is issued again.
//
// A region's internal links trust only its own CA, so another region's
// certificates are refused there; the links between regions trust the
// federation CA.
package secrets

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/isobar-mq/isobar/auth"
	"github.com/isobar-mq/isobar/internal/atomicfile"
	"github.com/isobar-mq/isobar/internal/tlsfiles"
)

// SuperUser is the role of superuser.token.
const SuperUser = "admin"

// Kinds are the components with a certificate from their region's CA.
var Kinds = []string{"etcd", "bookie", "broker", "nats", "replicator", "proxy"}

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
	// renewBefore reissues a certificate this close to its expiry.
	renewBefore = 30 * 24 * time.Hour
)

// Pair is a certificate file and its key file.
type Pair struct{ Cert, Key string }

// Files are the paths Ensure made or found.
type Files struct {
	Dir            string
	CA             string // the federation CA certificate
	SecretKey      string
	SuperUserToken string
	Global         Pair
	Regions        map[string]Region
}

// Region are one region's files.
type Region struct {
	Name            string
	CA              string          // the region CA certificate
	Certs           map[string]Pair // by kind (Kinds)
	Public          Pair            // brokers' TLS listeners
	Federation      Pair            // toward the other regions
	ReplicatorToken string
	ReplicatorRole  string
	ProxyToken      string
	ProxyRole       string
}

// Ensure makes, or reuses, the files of a federation of regions under
// dir, with server certificates valid for hosts (host names or IP
// addresses; localhost and 127.0.0.1 are always included). Files that
// exist and are valid are kept; a certificate close to expiry, or whose
// CA was made again, is reissued.
func Ensure(dir string, regions, hosts []string) (Files, error) {
	hosts = append([]string{"localhost", "127.0.0.1"}, hosts...)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Files{}, fmt.Errorf("secrets: %w", err)
	}
	f := Files{Dir: dir, Regions: map[string]Region{}}
	var err error
	ca, fresh, err := ensureCA(dir, "isobar federation CA")
	if err != nil {
		return Files{}, err
	}
	f.CA = filepath.Join(dir, "ca.pem")
	f.SecretKey = filepath.Join(dir, "secret.key")
	if err := ensureFile(f.SecretKey, func() ([]byte, error) { return auth.NewSecretKey(), nil }); err != nil {
		return Files{}, err
	}
	key, err := os.ReadFile(f.SecretKey)
	if err != nil {
		return Files{}, fmt.Errorf("secrets: %w", err)
	}
	token := func(role string) func() ([]byte, error) {
		return func() ([]byte, error) {
			t, err := auth.Sign(auth.HS256, key, role, time.Time{})
			return []byte(t + "\n"), err
		}
	}
	f.SuperUserToken = filepath.Join(dir, "superuser.token")
	if err := ensureFile(f.SuperUserToken, token(SuperUser)); err != nil {
		return Files{}, err
	}
	if f.Global, err = ensureLeaf(ca, fresh, filepath.Join(dir, "global", "server"), "isobar-global", hosts); err != nil {
		return Files{}, err
	}
	for _, name := range regions {
		rdir := filepath.Join(dir, name)
		rca, rfresh, err := ensureCA(rdir, "isobar region "+name+" CA")
		if err != nil {
			return Files{}, err
		}
		r := Region{Name: name, CA: filepath.Join(rdir, "ca.pem"), Certs: map[string]Pair{}, ReplicatorRole: "replicator-" + name, ProxyRole: "proxy-" + name}
		for _, kind := range Kinds {
			if r.Certs[kind], err = ensureLeaf(rca, rfresh, filepath.Join(rdir, kind), name+"-"+kind, hosts); err != nil {
				return Files{}, err
			}
		}
		if r.Public, err = ensureLeaf(ca, fresh, filepath.Join(rdir, "public"), name+"-broker", hosts); err != nil {
			return Files{}, err
		}
		if r.Federation, err = ensureLeaf(ca, fresh, filepath.Join(rdir, "federation"), name, hosts); err != nil {
			return Files{}, err
		}
		r.ReplicatorToken = filepath.Join(rdir, "replicator.token")
		if err := ensureFile(r.ReplicatorToken, token(r.ReplicatorRole)); err != nil {
			return Files{}, err
		}
		r.ProxyToken = filepath.Join(rdir, "proxy.token")
		if err := ensureFile(r.ProxyToken, token(r.ProxyRole)); err != nil {
			return Files{}, err
		}
		f.Regions[name] = r
	}
	return f, nil
}

// ensureCA returns the CA in dir (ca.pem, ca-key.pem), made if missing
// or expiring; fresh says it was made now.
func ensureCA(dir, name string) (tlsfiles.PEM, bool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tlsfiles.PEM{}, false, fmt.Errorf("secrets: %w", err)
	}
	certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	if p, err := load(certFile, keyFile); err == nil {
		return p, false, nil
	} else if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, errExpiring) {
		return tlsfiles.PEM{}, false, err
	}
	now := time.Now()
	p, err := tlsfiles.NewCA(name, now.Add(-time.Hour), now.Add(caValidity))
	if err != nil {
		return tlsfiles.PEM{}, false, err
	}
	return p, true, write(certFile, keyFile, p)
}

// ensureLeaf returns the certificate at base(.pem, -key.pem), issued by
// ca when missing, expiring or when ca is fresh.
func ensureLeaf(ca tlsfiles.PEM, caFresh bool, base, commonName string, hosts []string) (Pair, error) {
	pair := Pair{Cert: base + ".pem", Key: base + "-key.pem"}
	if !caFresh {
		p, err := load(pair.Cert, pair.Key)
		if err == nil && covers(p, hosts) {
			return pair, nil
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, errExpiring) {
			return Pair{}, err
		}
	}
	if err := os.MkdirAll(filepath.Dir(base), 0o700); err != nil {
		return Pair{}, fmt.Errorf("secrets: %w", err)
	}
	now := time.Now()
	p, err := tlsfiles.Issue(ca, commonName, hosts, true, now.Add(-time.Hour), now.Add(leafValidity))
	if err != nil {
		return Pair{}, err
	}
	return pair, write(pair.Cert, pair.Key, p)
}

// covers reports whether p's certificate is valid for every host.
func covers(p tlsfiles.PEM, hosts []string) bool {
	pair, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		return false
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return false
	}
	for _, h := range hosts {
		if leaf.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

var errExpiring = errors.New("secrets: certificate expires soon")

// load reads a certificate and key; errExpiring when the certificate is
// within renewBefore of its expiry, an os.ErrNotExist error when a file
// is missing.
func load(certFile, keyFile string) (tlsfiles.PEM, error) {
	c, err := os.ReadFile(certFile)
	if err != nil {
		return tlsfiles.PEM{}, fmt.Errorf("secrets: %w", err)
	}
	k, err := os.ReadFile(keyFile)
	if err != nil {
		return tlsfiles.PEM{}, fmt.Errorf("secrets: %w", err)
	}
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		return tlsfiles.PEM{}, fmt.Errorf("secrets: %s and %s: %w (delete them to make new ones)", certFile, keyFile, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return tlsfiles.PEM{}, fmt.Errorf("secrets: %s: %w", certFile, err)
	}
	if time.Until(leaf.NotAfter) < renewBefore {
		return tlsfiles.PEM{}, errExpiring
	}
	return tlsfiles.PEM{Cert: c, Key: k}, nil
}

// write stores a certificate and key, the key readable by the owner only;
// each file appears whole (written aside, then renamed).
func write(certFile, keyFile string, p tlsfiles.PEM) error {
	if err := writeFile(keyFile, p.Key); err != nil {
		return err
	}
	return writeFile(certFile, p.Cert)
}

func ensureFile(path string, make func() ([]byte, error)) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	b, err := make()
	if err != nil {
		return fmt.Errorf("secrets: %s: %w", path, err)
	}
	return writeFile(path, b)
}

// writeFile replaces path with b, readable by the owner only, atomically
// (package atomicfile).
func writeFile(path string, b []byte) error {
	if err := atomicfile.Write(path, b, 0o600); err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	return nil
}
