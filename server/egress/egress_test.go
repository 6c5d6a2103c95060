package egress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestLiteralIPSpellings(t *testing.T) {
	for in, want := range map[string]string{
		"2130706433":         "127.0.0.1",
		"0x7f.1":             "127.0.0.1",
		"0x7f000001":         "127.0.0.1",
		"0177.0.0.1":         "127.0.0.1",
		"127.1":              "127.0.0.1",
		"127.0.0.1.":         "127.0.0.1",
		"[::ffff:127.0.0.1]": "127.0.0.1",
		"::1":                "::1",
		"[fe80::1%eth0]":     "fe80::1",
		"0xa9.254.169.254":   "169.254.169.254",
	} {
		a, ok := literalIP(in)
		if !ok || a.String() != want {
			t.Errorf("literalIP(%q) = %v, %v; want %s", in, a, ok, want)
		}
	}
	for _, in := range []string{"example.com", "1.2.3.4.5", "256.1.1.1", "0x", "12a", "localhost"} {
		if a, ok := literalIP(in); ok && in != "0x" {
			t.Errorf("literalIP(%q) = %v; want no address", in, a)
		}
	}
}

func TestCheckURLRefusesLiteralInsideAddresses(t *testing.T) {
	g, err := New(Config{Protected: []string{"http://127.0.0.1:2379", "0.0.0.0:8080"}, Allow: []string{"10.9.0.0/16"}})
	if err != nil {
		t.Fatal(err)
	}
	refused := map[string]string{
		"http://127.0.0.1:2379/v3/kv/put":         "console's own endpoint",
		"http://2130706433/":                      "loopback",
		"http://0x7f.1:8070/":                     "loopback",
		"http://[::1]:8070/":                      "loopback",
		"http://[::ffff:127.0.0.1]/":              "loopback",
		"http://localhost./x":                     "loopback",
		"http://169.254.169.254/latest/meta-data": "metadata",
		"http://[fe80::1]/":                       "link-local",
		"http://10.0.0.1/":                        "private",
		"http://192.168.1.1/":                     "private",
		"http://[fd00::1]/":                       "private",
		"http://0.0.0.0:9/":                       "unspecified",
		"http://224.0.0.1/":                       "multicast",
		"http://metadata.google.internal/":        "metadata",
		"http://[64:ff9b::7f00:1]/":               "loopback",
	}
	for u, why := range refused {
		err := g.CheckURL(u)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), why) {
			t.Errorf("CheckURL(%s) = %v; want refused for %s", u, err, why)
		}
	}
	for _, u := range []string{"https://example.com/", "http://93.184.215.14/", "http://10.9.3.4:80/", "http://internal.example/"} {
		if err := g.CheckURL(u); err != nil {
			t.Errorf("CheckURL(%s) = %v; want nil", u, err)
		}
	}
}

func TestLoopbackModeKeepsProtectedPorts(t *testing.T) {
	g, err := New(Config{AllowLoopback: true, Protected: []string{"http://127.0.0.1:2379", "0.0.0.0:8080"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.CheckURL("http://127.0.0.1:8070/"); err != nil {
		t.Errorf("demo on loopback: %v", err)
	}
	for _, u := range []string{"http://127.0.0.1:2379/", "http://localhost:2379/", "http://127.0.0.1:8080/", "http://[::1]:8080/"} {
		if err := g.CheckURL(u); !errors.Is(err, ErrRefused) {
			t.Errorf("CheckURL(%s) = %v; want refused", u, err)
		}
	}
}

func TestClientChecksTheDialledAddress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:1/", http.StatusFound)
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	g := Strict()
	c := g.Client(time.Second, false)
	// A name that resolves to loopback is refused when dialled.
	_, err := c.Get("http://localhost:" + port + "/")
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("localhost: %v; want refused", err)
	}
	if err := g.Allow(srv.Listener.Addr().String()); err != nil {
		t.Fatal(err)
	}
	res, err := c.Get(srv.URL)
	if err != nil {
		t.Fatalf("allowlisted: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusFound {
		t.Fatalf("status %d: a redirect must be the answer, not followed", res.StatusCode)
	}
	// The allowlist names that host:port only.
	if _, err := g.DialContext(time.Second)(context.Background(), "tcp", "127.0.0.1:1"); !errors.Is(err, ErrRefused) {
		t.Fatalf("other port: %v; want refused", err)
	}
}

func TestBadAllowEntry(t *testing.T) {
	for _, e := range []string{"10.0.0.0/33", "nohost", "h:0", ":80"} {
		if _, err := New(Config{Allow: []string{e}}); err == nil || !strings.Contains(err.Error(), e) {
			t.Errorf("allow %q: %v; want an error naming it", e, err)
		}
	}
}
