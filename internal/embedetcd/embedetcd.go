// Package embedetcd starts a single-member etcd server inside the process.
//
// The console uses it when no etcd endpoints are configured, and tests use it
// (through internal/etcdtest) so that every test talks to a real etcd. It is
// a thin wrapper over go.etcd.io/etcd/server/v3/embed that picks sane
// defaults for one member, waits until the member is ready, and closes it
// without waiting for clients to hang up.
package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ElectionTimeout is the member's raft election timeout. etcd grants no
// lease shorter than 1.5 × the election timeout, rounded up to whole
// seconds: at etcd's default of 1000 ms that is 2 s, at 500 ms it is the
// 1 s the console's election session asks for. A single member never holds
// an election once it runs, so the shorter timeout costs nothing here.
const ElectionTimeout = 500 * time.Millisecond

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
	// CompactionRetention is how much history the member keeps: it
	// compacts every CompactionRetention (default 5m) to the revision of
	// one retention ago. Instance reports are etcd writes (up to about
	// 1,000/s for 10,000 instances), so without it history grows without
	// bound. Watchers behind a compaction list again (the SDK and the
	// console's fleet model do).
	CompactionRetention time.Duration
	// TLS, when set, makes the member serve its clients over TLS (the
	// ClientURL is then https://…); tests use it with auth turned on by
	// `console etcd init-auth`.
	TLS *TLS
}

// TLS are the member's client-side TLS files (PEM).
type TLS struct {
	CertFile, KeyFile string
	// TrustedCAFile, with ClientCertAuth, makes the member ask every client
	// for a certificate signed by this CA.
	TrustedCAFile  string
	ClientCertAuth bool
}

// DefaultCompactionRetention is the embedded member's history retention.
const DefaultCompactionRetention = 5 * time.Minute

// QuotaBackendBytes is the embedded member's space quota: etcd's 2 GiB
// default fills with a large fleet's report history between compactions.
const QuotaBackendBytes = 8 << 30

// Server is a running embedded etcd member.
type Server struct {
	etcd    *embed.Etcd
	streams *streams
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
	st := &streams{open: map[*context.CancelFunc]struct{}{}}
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
	cfg.ElectionMs = uint(ElectionTimeout / time.Millisecond)
	retention := c.CompactionRetention
	if retention <= 0 {
		retention = DefaultCompactionRetention
	}
	cfg.AutoCompactionMode = embed.CompactorModePeriodic
	cfg.AutoCompactionRetention = retention.String()
	cfg.QuotaBackendBytes = QuotaBackendBytes
	// No HTTP/JSON gateway: every client here (console, SDK, agent) speaks
	// gRPC, and the gateway is the door a plain HTTP request (a drill probe,
	// a webhook) would find on the client port.
	cfg.EnableGRPCGateway = false
	if c.TLS != nil {
		cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile = c.TLS.CertFile, c.TLS.KeyFile
		cfg.ClientTLSInfo.TrustedCAFile, cfg.ClientTLSInfo.ClientCertAuth = c.TLS.TrustedCAFile, c.TLS.ClientCertAuth
	}
	cfg.GRPCAdditionalServerOptions = []grpc.ServerOption{grpc.ChainStreamInterceptor(st.intercept)}
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
		return nil, fmt.Errorf("embedetcd: %w", err)
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
	return &Server{etcd: e, streams: st, Endpoint: cu.String()}, nil
}

// Close stops the member and releases its ports and files. Open client
// streams (SDK watches, lease keep-alives) are ended first with
// Unavailable, which clients treat as "reconnect later": etcd's own Close
// would otherwise wait its full request timeout (about 6 s) for each
// stream's client to hang up.
func (s *Server) Close() {
	s.streams.end()
	s.etcd.Close()
}

// streams tracks the member's open gRPC streams so Close can end them.
type streams struct {
	mu      sync.Mutex
	closing bool
	open    map[*context.CancelFunc]struct{}
}

// errClosing is what a stream's client sees when the member closes.
var errClosing = status.Error(codes.Unavailable, "embedetcd: member is shutting down")

// intercept runs a stream with a context that end cancels.
func (s *streams) intercept(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return errClosing
	}
	s.open[&cancel] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.open, &cancel)
		s.mu.Unlock()
	}()
	err := handler(srv, &serverStream{ServerStream: ss, ctx: ctx})
	if ctx.Err() != nil && ss.Context().Err() == nil {
		return errClosing // ended by end, not by the client
	}
	return err
}

// end cancels every open stream and refuses new ones.
func (s *streams) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = true
	for cancel := range s.open {
		(*cancel)()
	}
}

// serverStream is a stream whose context end can cancel.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *serverStream) Context() context.Context { return s.ctx }
