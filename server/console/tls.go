package console

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// certReloader serves the certificate in certFile/keyFile and loads it
// again when either file changes (looked at no more than once a second,
// on a handshake), so a renewed certificate needs no restart. A renewal
// that does not load (half written, key and certificate apart) keeps the
// previous certificate and is logged.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger
	now               func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string // the files' sizes and modification times when loaded
	checked time.Time
}

func newCertReloader(certFile, keyFile string, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, log: log, now: time.Now}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *certReloader) stampNow() string {
	var s string
	for _, f := range []string{r.certFile, r.keyFile} {
		if fi, err := os.Stat(f); err == nil {
			s += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return s
}

func (r *certReloader) load() error {
	stamp := r.stampNow()
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("console: TLS certificate: %w", err)
	}
	r.cert, r.stamp = &cert, stamp
	return nil
}

// getCertificate is tls.Config.GetCertificate.
func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.now(); now.Sub(r.checked) >= time.Second {
		r.checked = now
		if r.stampNow() != r.stamp {
			if err := r.load(); err != nil {
				r.log.Error("console: TLS certificate changed but does not load; serving the previous one", "err", err)
				r.stamp = r.stampNow() // do not retry every second until it changes again
			} else {
				r.log.Info("console: TLS certificate reloaded", "file", r.certFile)
			}
		}
	}
	return r.cert, nil
}

// tlsConfig is the listener's TLS configuration.
func (r *certReloader) tlsConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.getCertificate, NextProtos: []string{"h2", "http/1.1"}}
}

// hsts tells browsers to come back over HTTPS only (the console serves
// TLS itself).
func hsts(c *gin.Context) {
	c.Header("Strict-Transport-Security", "max-age=31536000")
	c.Next()
}
