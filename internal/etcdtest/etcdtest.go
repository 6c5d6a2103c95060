// Package etcdtest runs a real, in-process etcd member for tests: free
// loopback ports, a private data dir, cleanup at the end of the test, and
// Stop/Start so tests can simulate an outage on the same address.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/switchyard-io/switchyard/internal/embedetcd"
)

// Server is an embedded etcd member owned by one test.
type Server struct {
	tb       testing.TB
	cfg      embedetcd.Config
	mu       sync.Mutex
	srv      *embedetcd.Server
	Endpoint string
}

// Start starts a member on free loopback ports and stops it when tb ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return start(tb, "http", nil)
}

// start starts a member whose client URL has the scheme. A port FreeAddr
// found free can be taken before etcd binds it (another test's outgoing
// connection may get it as its local port), so a first start that finds
// its address in use tries again on new ports.
func start(tb testing.TB, scheme string, tls *embedetcd.TLS) *Server {
	tb.Helper()
	s := &Server{tb: tb}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		s.cfg = embedetcd.Config{
			Dir:       tb.TempDir(),
			ClientURL: scheme + "://" + FreeAddr(tb),
			PeerURL:   "http://" + FreeAddr(tb),
			Logger:    zap.NewNop(),
			TLS:       tls,
		}
		if s.srv, err = embedetcd.Start(s.cfg); err == nil {
			s.Endpoint = s.cfg.ClientURL
			tb.Cleanup(s.Stop)
			return s
		}
		if !errors.Is(err, syscall.EADDRINUSE) && !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	tb.Fatalf("etcdtest: %v", err)
	return nil
}

// Stop stops the member; clients see an outage until Restart.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.srv.Close()
		s.srv = nil
	}
}

// Restart starts the member again on the same address and data dir.
func (s *Server) Restart() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return
	}
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		// The port may take a moment to be released after Stop.
		if s.srv, err = embedetcd.Start(s.cfg); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.tb.Fatalf("etcdtest: %v", err)
}

// Client returns a client connected to the member, closed when tb ends.
func (s *Server) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{s.Endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		tb.Fatalf("etcdtest: client: %v", err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// Get returns the value at key, or "" and false when it does not exist.
func (s *Server) Get(tb testing.TB, c *clientv3.Client, key string) (string, bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, key)
	if err != nil {
		tb.Fatalf("etcdtest: get %s: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return "", false
	}
	return string(resp.Kvs[0].Value), true
}

// FreeAddr returns a loopback host:port that was free a moment ago.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	defer l.Close()
	return fmt.Sprintf("127.0.0.1:%d", l.Addr().(*net.TCPAddr).Port)
}

// LeakOptions are the goleak options for packages that run an embedded etcd:
// it and gRPC keep a few process-wide goroutines that are not leaks.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreAnyFunction("go.etcd.io/etcd/pkg/v3/logutil.(*MergeLogger).outputLoop"),
		goleak.IgnoreAnyFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
	}
}

// LeaderLease returns the lease of the election candidate that leads the
// election at key (concurrency.Election's prefix), or NoLease while none
// does.
func LeaderLease(tb testing.TB, c *clientv3.Client, key string) clientv3.LeaseID {
	tb.Helper()
	resp, err := c.Get(context.Background(), key, clientv3.WithFirstCreate()...)
	if err != nil {
		tb.Fatalf("etcdtest: election %s: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return clientv3.NoLease
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}
