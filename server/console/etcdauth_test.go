package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/switchyard-io/switchyard/internal/agent"
	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/etcdauth"
)

// TestEtcdTLSAndRoles: on an etcd that serves TLS only, asks for client
// certificates and has auth turned on by `console etcd init-auth`, the
// console (its role), an SDK and the agent (the SDK role) work end to end:
// a flip reaches both, the SDK registers and reports. With the SDK's
// credentials, etcd refuses a put of a switch key, a delete of the
// election key and a read of another namespace.
func TestEtcdTLSAndRoles(t *testing.T) {
	certs := etcdtest.NewCerts(t)
	srv := etcdtest.StartTLS(t, certs)
	tlsFiles := sdk.EtcdSecurity{CAFile: certs.CAFile, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}
	const consolePW, sdkPW, rootPW = "console-password-1", "sdk-password-123", "root-password-12"
	pwFile := filepath.Join(t.TempDir(), "console-pw")
	if err := os.WriteFile(pwFile, []byte(consolePW+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	cfg := console.DefaultConfig()
	cfg.EtcdEndpoints, cfg.Etcd = []string{srv.Endpoint}, tlsFiles
	vars := map[string]string{"SWITCHYARD_ETCD_ROOT_PASSWORD": rootPW, "SWITCHYARD_ETCD_SDK_PASSWORD": sdkPW}
	var out strings.Builder
	err := console.EtcdCommand(context.Background(), cfg, func(k string) string { return vars[k] },
		[]string{"init-auth", "--console-password-file", pwFile}, &out)
	if err != nil {
		t.Fatalf("init-auth: %v\n%s", err, out.String())
	}
	t.Logf("init-auth:\n%s", out.String())
	for _, secret := range []string{consolePW, sdkPW, rootPW} {
		if strings.Contains(out.String(), secret) {
			t.Fatal("init-auth printed a password")
		}
	}

	// Without credentials etcd now refuses everything.
	anon := etcdClient(t, srv.Endpoint, tlsFiles)
	if _, err := anon.Get(context.Background(), "/switchyard/"); err == nil {
		t.Fatal("auth is not on: an anonymous read passed")
	}

	e := &env{t: t, etcd: srv, pgURL: pgtest.NewDatabase(t)}
	c := e.start(func(cfg *console.Config) {
		cfg.Etcd = tlsFiles
		cfg.Etcd.Username, cfg.Etcd.PasswordFile = etcdauth.ConsoleUser("default"), pwFile
	})
	waitLeader(t, c)

	sdkSec := tlsFiles
	sdkSec.Username, sdkSec.Password = etcdauth.SDKUser("default"), sdkPW
	ctx := context.Background()
	client, err := sdk.New(ctx, sdk.Config{Endpoints: []string{srv.Endpoint}, App: "checkout", InstanceID: "inst-1",
		Security: sdkSec, ReportInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := client.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	acfg := agent.DefaultConfig()
	acfg.EtcdEndpoints, acfg.App, acfg.InstanceID, acfg.SnapshotDir = []string{srv.Endpoint}, "checkout", "agent-1", t.TempDir()
	acfg.Etcd = sdkSec
	ag, err := agent.New(ctx, acfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	agentSrv := httptest.NewServer(ag.Handler())
	defer func() { agentSrv.Close(); ag.Close() }()

	// Flip → SDK and agent answer on.
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches", adminToken, `{"name":"recommend","level":"L3","reason":"seed"}`), 201)
	r := mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches/recommend/on", adminToken, `{"reason":"flip"}`), 200)
	if !strings.Contains(r.Raw, `"published":true`) {
		t.Fatalf("not published: %s", r.Raw)
	}
	h := client.Switch("recommend")
	servertest.Eventually(t, 10*time.Second, "the SDK answers on", func() bool { return h.On(ctx) })
	servertest.Eventually(t, 10*time.Second, "the agent answers on", func() bool {
		res, err := http.Get(agentSrv.URL + "/v1/switches/recommend")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		var v struct{ On bool }
		b, _ := io.ReadAll(res.Body)
		_ = json.Unmarshal(b, &v)
		return v.On
	})
	// Registration and reports: the console sees both instances.
	servertest.Eventually(t, 10*time.Second, "the console sees the SDK and the agent", func() bool {
		r := call(t, c, "GET", "/api/v1/apps/checkout/instances", adminToken, "")
		return strings.Contains(r.Raw, "inst-1") && strings.Contains(r.Raw, "agent-1")
	})

	// The SDK's credentials cannot change what operators see.
	raw := etcdClient(t, srv.Endpoint, sdkSec)
	denied := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("%s with the SDK's credentials: %v; want permission denied", what, err)
		}
	}
	_, err = raw.Put(ctx, wire.SwitchKey("default", "checkout", "recommend"), `{"state":"off"}`)
	denied("put of a switch key", err)
	_, err = raw.Put(ctx, wire.OverrideKey("default", "checkout", "recommend"), `{"state":"off"}`)
	denied("put of an override key", err)
	_, err = raw.Delete(ctx, wire.ElectionKey("default"), clientv3.WithPrefix())
	denied("delete of the election key", err)
	_, err = raw.Get(ctx, wire.NamespacePrefix("other"), clientv3.WithPrefix())
	denied("read of another namespace", err)
	if _, err := raw.Get(ctx, wire.AppPrefix("default", wire.KindSwitches, "checkout"), clientv3.WithPrefix()); err != nil {
		t.Errorf("the SDK role cannot read switches: %v", err)
	}
}

// etcdClient connects to endpoint with sec, closed when t ends.
func etcdClient(t *testing.T, endpoint string, sec sdk.EtcdSecurity) *clientv3.Client {
	t.Helper()
	cfg := clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if err := sec.Apply(&cfg); err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
