// Package tlstest makes a certificate authority and certificates for
// tests: PEM files a broker's ssl.* keys and a client can read.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a test certificate authority.
type CA struct {
	Cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	PEM     []byte // the CA certificate
	PEMFile string // PEM written to a file (a truststore)
	dir     string
	serial  int64
}

// NewCA makes a CA whose files live in t's temporary directory.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sluice test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{Cert: cert, key: key, dir: t.TempDir(), serial: 1}
	ca.PEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	ca.PEMFile = filepath.Join(ca.dir, "ca.pem")
	if err := os.WriteFile(ca.PEMFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return ca
}

// Pool is a pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Leaf is an issued certificate and key.
type Leaf struct {
	CertPEM, KeyPEM []byte
	File            string // key then certificate chain in one PEM file (a keystore)
	TLS             tls.Certificate
}

// Options shape a certificate.
type Options struct {
	CommonName string
	OU         string
	NotAfter   time.Time // zero: a day from now
	Client     bool      // client auth usage (else server, for 127.0.0.1 and localhost)
}

// Issue makes a certificate signed by the CA.
func (ca *CA) Issue(t testing.TB, o Options) *Leaf {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.serial++
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial),
		Subject:      pkix.Name{CommonName: o.CommonName},
		NotBefore:    time.Now().Add(-2 * time.Hour),
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if o.OU != "" {
		tmpl.Subject.OrganizationalUnit = []string{o.OU}
	}
	if !o.Client {
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	l := &Leaf{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
	}
	l.TLS, err = tls.X509KeyPair(l.CertPEM, l.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(ca.dir, "keystore-*.pem")
	if err != nil {
		t.Fatal(err)
	}
	f.Write(l.KeyPEM)
	f.Write(l.CertPEM)
	f.Close()
	l.File = f.Name()
	return l
}

// ClientConfig is a client TLS config trusting the CA, with cert (if not
// nil) as client certificate.
func (ca *CA) ClientConfig(cert *Leaf) *tls.Config {
	c := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	if cert != nil {
		c.Certificates = []tls.Certificate{cert.TLS}
	}
	return c
}
