package console_test

import (
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/server/console"
)

// embeddedConfig is a console on its embedded defaults (etcd and SQLite in
// a fresh data dir) on free ports.
func embeddedConfig(t *testing.T) console.Config {
	cfg := console.DefaultConfig()
	cfg.Listen = etcdtest.FreeAddr(t)
	cfg.DataDir = t.TempDir()
	cfg.EmbeddedEtcdURL = "http://" + etcdtest.FreeAddr(t)
	cfg.EmbeddedEtcdPeer = "http://" + etcdtest.FreeAddr(t)
	cfg.BootstrapToken = adminToken
	return cfg
}

// hold listens on addr (host:port or a URL) until the test ends and
// returns its host:port.
func hold(t *testing.T, addr string) string {
	t.Helper()
	addr = hostPort(addr)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return addr
}

// hostPort is the host:port of a URL, or addr itself.
func hostPort(addr string) string {
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		return u.Host
	}
	return addr
}

// TestStartFailures: every way a start can fail returns one line that
// names the cause and the setting to change, and leaves nothing behind:
// no goroutine, no port, no open file. (Start used to panic on every one
// of them: a nil *Console was closed on the error path.)
func TestStartFailures(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, cfg *console.Config) (held string)
		want  []string // substrings of the error
	}{
		{"HTTP port taken", func(t *testing.T, cfg *console.Config) string { return hold(t, cfg.Listen) },
			[]string{"address already in use", "--listen or SWITCHYARD_LISTEN"}},
		{"embedded etcd client port taken", func(t *testing.T, cfg *console.Config) string { return hold(t, cfg.EmbeddedEtcdURL) },
			[]string{"address already in use", "--embedded-etcd-client-url or SWITCHYARD_EMBEDDED_ETCD_CLIENT_URL", "--etcd-endpoints"}},
		{"embedded etcd peer port taken", func(t *testing.T, cfg *console.Config) string { return hold(t, cfg.EmbeddedEtcdPeer) },
			[]string{"address already in use", "--embedded-etcd-peer-url or SWITCHYARD_EMBEDDED_ETCD_PEER_URL"}},
		{"database unreachable", func(t *testing.T, cfg *console.Config) string {
			cfg.DatabaseURL = "postgres://postgres:s3cret@" + etcdtest.FreeAddr(t) + "/switchyard?sslmode=disable"
			return ""
		}, []string{"connection refused", "--database-url or SWITCHYARD_DATABASE_URL"}},
		{"data dir unwritable", func(t *testing.T, cfg *console.Config) string {
			file := filepath.Join(t.TempDir(), "file")
			if err := os.WriteFile(file, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			cfg.DataDir = filepath.Join(file, "data")
			return ""
		}, []string{"not a directory", "--data-dir or SWITCHYARD_DATA_DIR"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, append(etcdtest.LeakOptions(), goleak.IgnoreCurrent())...)
			cfg := embeddedConfig(t)
			held := tc.setup(t, &cfg)
			c, err := console.Start(context.Background(), cfg, nil)
			if err == nil {
				stop(c)
				t.Fatal("started")
			}
			msg := err.Error()
			t.Logf("error: %s", msg)
			if strings.Contains(msg, "\n") || strings.Contains(msg, "s3cret") {
				t.Errorf("error is not one line without secrets: %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q: %s", w, msg)
				}
			}
			// Every port the start took is free again.
			for _, addr := range []string{cfg.Listen, cfg.EmbeddedEtcdURL, cfg.EmbeddedEtcdPeer} {
				if addr = hostPort(addr); addr == held {
					continue
				}
				l, err := net.Listen("tcp", addr)
				if err != nil {
					t.Errorf("port %s still taken after the failed start: %v", addr, err)
					continue
				}
				l.Close()
			}
		})
	}
}

// TestSecondConsoleOnOneHost: a second console started next to a running
// one with the same configuration, or the same data dir, or the same
// embedded etcd ports, fails at once with one line naming the setting, and
// the first keeps running.
func TestSecondConsoleOnOneHost(t *testing.T) {
	cfg := embeddedConfig(t)
	first, err := console.Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(first)
	check := func(cfg console.Config, want ...string) {
		t.Helper()
		c, err := console.Start(context.Background(), cfg, nil)
		if err == nil {
			stop(c)
			t.Fatal("second console started")
		}
		t.Logf("error: %v", err)
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("error lacks %q: %v", w, err)
			}
		}
	}
	check(cfg, "--listen or SWITCHYARD_LISTEN")
	// On other ports it finds the data dir taken (the embedded etcd would
	// wait forever for its database's file lock).
	other := embeddedConfig(t)
	other.DataDir = cfg.DataDir
	check(other, "in use by another console", "--data-dir or SWITCHYARD_DATA_DIR")
	// In another data dir it trips over the embedded etcd's ports.
	other.DataDir = t.TempDir()
	other.EmbeddedEtcdURL, other.EmbeddedEtcdPeer = cfg.EmbeddedEtcdURL, cfg.EmbeddedEtcdPeer
	check(other, "--embedded-etcd-")
	mustStatus(t, call(t, first, "GET", "/healthz", "", ""), 200)
}

// TestConsolesStartTogether: consoles started at once on an empty
// Postgres database all come up (the migrations take a lock), and exactly
// one leads.
func TestConsolesStartTogether(t *testing.T) {
	e := &env{t: t, etcd: etcdtest.Start(t), pgURL: pgtest.NewDatabase(t)}
	e.cli = e.etcd.Client(t)
	const n = 4
	type started struct {
		c   *console.Console
		err error
	}
	results := make(chan started, n)
	for range n {
		go func() {
			cfg := console.DefaultConfig()
			cfg.Listen = "127.0.0.1:0"
			cfg.DataDir = t.TempDir()
			cfg.DatabaseURL = e.pgURL
			cfg.EtcdEndpoints = []string{e.etcd.Endpoint}
			cfg.BootstrapToken = adminToken
			c, err := console.Start(context.Background(), cfg, nil)
			results <- started{c, err}
		}()
	}
	var consoles []*console.Console
	for range n {
		r := <-results
		if r.err != nil {
			t.Errorf("start: %v", r.err)
			continue
		}
		consoles = append(consoles, r.c)
		t.Cleanup(func() { stop(r.c) })
	}
	if t.Failed() {
		t.FailNow()
	}
	servertest.Eventually(t, 15*time.Second, "exactly one console leads", func() bool {
		leaders := 0
		for _, c := range consoles {
			if c.Scheduler.Leading() {
				leaders++
			}
		}
		return leaders == 1
	})
	for _, c := range consoles {
		mustStatus(t, call(t, c, "GET", "/api/v1/apps/checkout/switches", adminToken, ""), 200)
	}
}
