package sdk

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, etcdtest.LeakOptions()...)
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// newTestClient starts a client against endpoints with test defaults.
func newTestClient(t testing.TB, cfg Config) *Client {
	t.Helper()
	return newWrappedTestClient(t, cfg, nil)
}

// newWrappedTestClient is newTestClient with newClient's wrap hook.
func newWrappedTestClient(t testing.TB, cfg Config, wrap func(*clientv3.Client)) *Client {
	t.Helper()
	if cfg.Namespace == "" {
		cfg.Namespace = "test"
	}
	if cfg.App == "" {
		cfg.App = "checkout"
	}
	if cfg.Logger == nil {
		cfg.Logger = discard
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = 3 * time.Second
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 2 * time.Second
	}
	c, err := newClient(context.Background(), cfg, wrap)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func mkSwitch(app, name, st string, percent float64) *wire.Switch {
	return &wire.Switch{App: app, Name: name, Level: wire.L3, State: st,
		Rollout: wire.Rollout{Percent: percent}, Version: 1}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func put(t testing.TB, cli *clientv3.Client, key, value string, opts ...clientv3.OpOption) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Put(ctx, key, value, opts...)
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return resp.Header.Revision
}

func putSwitch(t testing.TB, cli *clientv3.Client, ns string, sw *wire.Switch) int64 {
	t.Helper()
	return put(t, cli, wire.SwitchKey(ns, sw.App, sw.Name), mustJSON(t, sw))
}

func del(t testing.TB, cli *clientv3.Client, key string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Delete(ctx, key)
	if err != nil {
		t.Fatalf("delete %s: %v", key, err)
	}
	return resp.Header.Revision
}

func endpoint(srv *etcdtest.Server) string {
	return strings.TrimPrefix(srv.Endpoint, "http://")
}

// bridge is a TCP forwarder between clients and etcd that a test can cut,
// like the bridge etcd's own integration tests use to simulate partitions.
type bridge struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	paused bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newBridge(t testing.TB, target string) *bridge {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &bridge{l: l, target: target, conns: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(b.close)
	return b
}

func (b *bridge) addr() string { return b.l.Addr().String() }

func (b *bridge) accept() {
	defer b.wg.Done()
	for {
		in, err := b.l.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		if b.paused {
			b.mu.Unlock()
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", b.target)
		if err != nil {
			b.mu.Unlock()
			in.Close()
			continue
		}
		b.conns[in], b.conns[out] = struct{}{}, struct{}{}
		b.wg.Add(2)
		b.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			defer b.wg.Done()
			io.Copy(dst, src)
			dst.Close()
			src.Close()
		}
		go pipe(out, in)
		go pipe(in, out)
	}
}

// pause cuts every connection and refuses new ones until resume.
func (b *bridge) pause() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.paused = true
	for c := range b.conns {
		c.Close()
		delete(b.conns, c)
	}
}

func (b *bridge) resume() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.paused = false
}

func (b *bridge) close() {
	b.l.Close()
	b.pause()
	b.wg.Wait()
}
