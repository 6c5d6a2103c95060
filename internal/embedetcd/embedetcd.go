// Package embedetcd starts a single-member etcd server inside the process.
//
// The console uses it when no etcd endpoints are configured, and tests use it
// (through internal/etcdtest) so that every test talks to a real etcd. It is
// a thin wrapper over go.etcd.io/etcd/server/v3/embed that picks sane
// defaults for one member and waits until the member is ready.
package embedetcd

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Config describes the embedded member.
type Config struct {
	// Dir holds the member's data; it is created if missing.
	Dir string
	// ClientURL is where clients connect, e.g. "http://127.0.0.1:2379".
	ClientURL string
	// PeerURL is the member's peer address, e.g. "http://127.0.0.1:2380".
	PeerURL string
	// Name of the member; "default" if empty.
	Name string
	// StartTimeout bounds the wait for readiness; 30s if zero.
	StartTimeout time.Duration
	// Logger receives etcd's logs; they are discarded when nil.
	Logger *zap.Logger
}

// Server is a running embedded etcd member.
type Server struct {
	etcd *embed.Etcd
	// Endpoint is the client URL to dial.
	Endpoint string
}

// Start starts the member and waits until it serves clients.
func Start(c Config) (*Server, error) {
	cu, err := url.Parse(c.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: client url: %w", err)
	}
	pu, err := url.Parse(c.PeerURL)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: peer url: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Dir = c.Dir
	if c.Name != "" {
		cfg.Name = c.Name
	}
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	if c.Logger != nil {
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(c.Logger)
	} else {
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	}
	timeout := c.StartTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: start: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedetcd: %w", err)
	case <-time.After(timeout):
		e.Server.Stop()
		e.Close()
		return nil, errors.New("embedetcd: member not ready in time")
	}
	return &Server{etcd: e, Endpoint: cu.String()}, nil
}

// Close stops the member and releases its ports and files.
func (s *Server) Close() { s.etcd.Close() }
