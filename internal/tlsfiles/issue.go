package tlsfiles

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// PEM is a certificate and its private key, PEM-encoded.
type PEM struct {
	Cert, Key []byte
}

// NewCA makes a self-signed certificate authority (ECDSA P-256) valid
// from notBefore until notAfter.
func NewCA(commonName string, notBefore, notAfter time.Time) (PEM, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"Isobar"}},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return issue(tmpl, nil, nil)
}

// Issue makes a certificate signed by ca for commonName: a server
// certificate for hosts (DNS names or IP addresses) and, with client, one
// that also authenticates a client (the role is its common name).
func Issue(ca PEM, commonName string, hosts []string, client bool, notBefore, notAfter time.Time) (PEM, error) {
	pair, err := tls.X509KeyPair(ca.Cert, ca.Key)
	if err != nil {
		return PEM{}, fmt.Errorf("tlsfiles: CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return PEM{}, fmt.Errorf("tlsfiles: CA: %w", err)
	}
	if !caCert.IsCA {
		return PEM{}, errors.New("tlsfiles: the signing certificate is not a CA")
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName, Organization: []string{"Isobar"}},
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return issue(tmpl, caCert, pair.PrivateKey)
}

func issue(tmpl, parent *x509.Certificate, parentKey any) (PEM, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return PEM{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return PEM{}, err
	}
	tmpl.SerialNumber = serial
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return PEM{}, fmt.Errorf("tlsfiles: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return PEM{}, err
	}
	return PEM{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
	}, nil
}
