package sdk

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// EtcdSecurity is how an etcd client checks etcd and proves who it is:
// TLS from PEM files, and etcd's own user name and password. The console,
// the agent and the SDK share it; every secret can come from a file
// (Kubernetes and systemd credentials mount them so).
type EtcdSecurity struct {
	// CAFile is the PEM bundle etcd's server certificate is checked
	// against; set, the client speaks TLS. Empty with a certificate: the
	// system roots.
	CAFile string
	// CertFile and KeyFile are the client certificate and its key (PEM),
	// for an etcd that asks for one (--client-cert-auth).
	CertFile, KeyFile string
	// ServerName is the name etcd's certificate must carry when it is not
	// the endpoint's host.
	ServerName string
	// Username and Password authenticate to etcd (auth enabled); the
	// password may instead be read from PasswordFile (its content, without
	// the trailing newline).
	Username, Password, PasswordFile string
}

// TLSEnabled reports whether any TLS setting is given.
func (s EtcdSecurity) TLSEnabled() bool {
	return s.CAFile != "" || s.CertFile != "" || s.KeyFile != "" || s.ServerName != ""
}

// Validate checks that the settings go together; it reads no file.
func (s EtcdSecurity) Validate() error {
	var errs []error
	if (s.CertFile == "") != (s.KeyFile == "") {
		errs = append(errs, errors.New("etcd cert file and key file go together"))
	}
	if s.Password != "" && s.PasswordFile != "" {
		errs = append(errs, errors.New("etcd password and password file: give one"))
	}
	if s.Username == "" && (s.Password != "" || s.PasswordFile != "") {
		errs = append(errs, errors.New("etcd password without a user name"))
	}
	if s.Username != "" && s.Password == "" && s.PasswordFile == "" {
		errs = append(errs, errors.New("etcd user name without a password (or password file)"))
	}
	return errors.Join(errs...)
}

// Apply sets c's TLS and credentials from s, reading the files now. A c
// that already has a TLS configuration keeps it when s gives none.
func (s EtcdSecurity) Apply(c *clientv3.Config) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if s.TLSEnabled() {
		t, err := s.TLSConfig()
		if err != nil {
			return err
		}
		c.TLS = t
	}
	if s.Username != "" {
		pw, err := s.password()
		if err != nil {
			return err
		}
		c.Username, c.Password = s.Username, pw
	}
	return nil
}

// TLSConfig builds the client TLS configuration from the files.
func (s EtcdSecurity) TLSConfig() (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.ServerName}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("etcd CA file: %w", err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd CA file %s: no PEM certificate in it", s.CAFile)
		}
	}
	if s.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("etcd client certificate: %w", err)
		}
		t.Certificates = []tls.Certificate{cert}
	}
	return t, nil
}

func (s EtcdSecurity) password() (string, error) {
	if s.PasswordFile == "" {
		return s.Password, nil
	}
	b, err := os.ReadFile(s.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("etcd password file: %w", err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("etcd password file %s is empty", s.PasswordFile)
	}
	return pw, nil
}
