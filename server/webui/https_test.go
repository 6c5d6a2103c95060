package webui_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/cookiejar"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/webui"
)

// TestHTTPS: with --tls-cert/--tls-key the console serves HTTPS only,
// answers with HSTS, and its sign-in cookies are Secure; a renewed
// certificate written over the files is served without a restart.
func TestHTTPS(t *testing.T) {
	certs := etcdtest.NewCerts(t)
	c := startConsoleWith(t, webui.Options{}, func(cfg *console.Config) {
		cfg.TLSCert, cfg.TLSKey = certs.ServerCert, certs.ServerKey
	})
	if !strings.HasPrefix(c.URL(), "https://") {
		t.Fatalf("URL %s", c.URL())
	}
	trusting := func(caFile string) *http.Transport {
		pem, _ := os.ReadFile(caFile)
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}
	}
	cl := newClient(t, c)
	cl.http.Transport = trusting(certs.CAFile)
	cl.signIn("admin", bootstrapToken)
	// The sign-in's cookies: look at the raw Set-Cookie of a fresh sign-in.
	jar, _ := cookiejar.New(nil)
	raw := &client{t: t, base: c.URL(), http: &http.Client{Jar: jar, Transport: trusting(certs.CAFile),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	res, err := raw.http.Get(c.URL() + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.Header.Get("Strict-Transport-Security") == "" {
		t.Fatal("no HSTS header")
	}
	for _, sc := range res.Header.Values("Set-Cookie") {
		if !strings.Contains(sc, "Secure") {
			t.Fatalf("cookie without Secure: %s", sc)
		}
	}
	tok := raw.csrf("/ui/login")
	req, _ := http.NewRequest("POST", c.URL()+"/ui/login", strings.NewReader("_csrf="+tok+"&username=admin&password="+bootstrapToken+"&next=%2Fui%2F"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err = raw.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	cookies := res.Header.Values("Set-Cookie")
	if res.StatusCode != http.StatusSeeOther || len(cookies) == 0 {
		t.Fatalf("sign in: %d %v", res.StatusCode, cookies)
	}
	for _, sc := range cookies {
		if !strings.Contains(sc, "Secure") || !strings.Contains(sc, "HttpOnly") {
			t.Fatalf("sign-in cookie without Secure: %s", sc)
		}
	}
	// Plain HTTP gets no answer.
	if res, err := http.Get("http://" + c.Addr() + "/healthz"); err == nil && res.StatusCode == http.StatusOK {
		t.Fatal("plain HTTP served")
	}

	// Renewal: a certificate of another CA written over the files.
	renewed := etcdtest.NewCerts(t)
	for src, dst := range map[string]string{renewed.ServerCert: certs.ServerCert, renewed.ServerKey: certs.ServerKey} {
		b, _ := os.ReadFile(src)
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := (&http.Client{Transport: trusting(renewed.CAFile)}).Get(c.URL() + "/healthz")
		if err == nil {
			res.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the renewed certificate is not served: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestForwardedProtoTrustedOnly: behind a TLS-terminating proxy the
// sign-in cookie is Secure when a proxy listed in --trusted-proxies says
// the request came over HTTPS; the same headers from anyone else change
// nothing.
func TestForwardedProtoTrustedOnly(t *testing.T) {
	for _, trusted := range []bool{true, false} {
		c := startConsoleWith(t, webui.Options{}, func(cfg *console.Config) {
			if trusted {
				cfg.TrustedProxies = []string{"127.0.0.1"}
			}
		})
		jar, _ := cookiejar.New(nil)
		cl := &client{t: t, base: c.URL(), http: &http.Client{Jar: jar,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
		tok := cl.csrf("/ui/login")
		req, _ := http.NewRequest("POST", c.URL()+"/ui/login", strings.NewReader("_csrf="+tok+"&username=admin&password="+bootstrapToken+"&next=%2Fui%2F"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-Proto", "https")
		req.Header.Set("X-Forwarded-For", "203.0.113.9")
		res, err := cl.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		var session string
		for _, sc := range res.Header.Values("Set-Cookie") {
			if !strings.Contains(sc, "Max-Age=0") && !strings.Contains(sc, "csrf") {
				session = sc
			}
		}
		if res.StatusCode != http.StatusSeeOther || session == "" {
			t.Fatalf("sign in (trusted %v): %d %v", trusted, res.StatusCode, res.Header.Values("Set-Cookie"))
		}
		if strings.Contains(session, "Secure") != trusted {
			t.Fatalf("trusted proxy %v: cookie %s", trusted, session)
		}
	}
}
