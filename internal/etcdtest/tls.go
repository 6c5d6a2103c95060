package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/embedetcd"
)

// Certs are PEM files made for one test: a CA, a server certificate for
// 127.0.0.1 and localhost, and a client certificate, all signed by the CA.
type Certs struct {
	CAFile                string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// NewCerts writes a fresh CA and its certificates into a temporary dir.
func NewCerts(tb testing.TB) Certs {
	tb.Helper()
	dir := tb.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "switchyard test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		tb.Fatalf("etcdtest: CA: %v", err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	c := Certs{CAFile: filepath.Join(dir, "ca.pem")}
	writePEM(tb, c.CAFile, "CERTIFICATE", caDER)
	issue := func(name string, serial int64, usage x509.ExtKeyUsage) (certFile, keyFile string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			tb.Fatalf("etcdtest: certificate %s: %v", name, err)
		}
		kder, _ := x509.MarshalECPrivateKey(key)
		certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		writePEM(tb, certFile, "CERTIFICATE", der)
		writePEM(tb, keyFile, "EC PRIVATE KEY", kder)
		return certFile, keyFile
	}
	c.ServerCert, c.ServerKey = issue("server", 2, x509.ExtKeyUsageServerAuth)
	c.ClientCert, c.ClientKey = issue("client", 3, x509.ExtKeyUsageClientAuth)
	return c
}

func writePEM(tb testing.TB, path, kind string, der []byte) {
	tb.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
}

// StartTLS starts a member that serves its clients over TLS and asks each
// for a certificate signed by certs' CA. Its Endpoint is https://….
// Authentication is off until a client turns it on (as `console etcd
// init-auth` does).
func StartTLS(tb testing.TB, certs Certs) *Server {
	tb.Helper()
	return start(tb, "https", &embedetcd.TLS{CertFile: certs.ServerCert, KeyFile: certs.ServerKey,
		TrustedCAFile: certs.CAFile, ClientCertAuth: true})
}
