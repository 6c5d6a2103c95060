package sdk

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// TestAuthenticatingClientStartsWithoutEtcd: etcd's client authenticates
// inside its constructor, so an SDK with a user name connects in the
// background: New answers from the snapshot while etcd is away, and the
// client goes live once etcd is back.
func TestAuthenticatingClientStartsWithoutEtcd(t *testing.T) {
	const ns, app = "auth", "checkout"
	dir := t.TempDir()
	writeSnapshot(t, dir, ns, app, 7, mkSwitch(app, "recommend", wire.StateOn, 100))
	srv := etcdtest.Start(t)
	srv.Stop()
	c, err := New(context.Background(), Config{Endpoints: []string{srv.Endpoint}, Namespace: ns, App: app, SnapshotDir: dir,
		Logger: discard, Security: EtcdSecurity{Username: "switchyard-sdk-auth", Password: "a-password-1"}})
	if err != nil {
		t.Fatalf("New with etcd down: %v", err)
	}
	defer c.Close()
	if h := c.Switch("recommend"); h.Source() != SourceSnapshot || !h.On(context.Background()) || c.Ready() {
		t.Fatalf("with etcd down: source %v, ready %v", h.Source(), c.Ready())
	}
	srv.Restart() // auth is off there: etcd's client then goes on without a token
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatalf("the client did not connect once etcd was back: %v", err)
	}
}

func TestEtcdSecurityValidate(t *testing.T) {
	for name, s := range map[string]EtcdSecurity{
		"cert without key":      {CertFile: "c.pem"},
		"password without user": {Password: "p"},
		"user without password": {Username: "u"},
		"password and its file": {Username: "u", Password: "p", PasswordFile: "f"},
	} {
		if err := s.Validate(); err == nil {
			t.Errorf("%s: valid", name)
		}
	}
	if _, err := New(context.Background(), Config{App: "x", Security: EtcdSecurity{CAFile: "ca.pem"}, TLS: &tls.Config{}}); err == nil {
		t.Error("TLS and TLS files together: accepted")
	}
}
