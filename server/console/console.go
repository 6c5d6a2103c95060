package console

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/embedetcd"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/api"
	"github.com/switchyard-io/switchyard/server/egress"
	"github.com/switchyard-io/switchyard/server/fleet"
	"github.com/switchyard-io/switchyard/server/lead"
	"github.com/switchyard-io/switchyard/server/seal"
	"github.com/switchyard-io/switchyard/server/signal"
	"github.com/switchyard-io/switchyard/server/webui"
)

// Console is a running console.
type Console struct {
	Config    Config
	Service   *server.Service
	Scheduler *lead.Scheduler
	Publisher *server.Publisher
	// Fleet is the read model of the SDK instances, fed by one etcd watch.
	Fleet *fleet.Model
	// Sources are the metric sources leader jobs query.
	Sources signal.Sources
	Etcd    *clientv3.Client
	DB      *gorm.DB
	Engine  *gin.Engine
	// AuditKey signs the audit log's checkpoints (nil: no key, none signed).
	AuditKey *audit.Key
	// Egress guards what drill probes and webhook deliveries reach.
	Egress *egress.Guard
	// Keys seal channel secrets and probe header values at rest; nil when
	// no key file is configured outside the embedded defaults.
	Keys *seal.Keyring
	// GeneratedToken is the bootstrap admin token generated at this start,
	// or "" when one was configured or already existed.
	GeneratedToken string

	log      *slog.Logger
	listener net.Listener
	http     *http.Server
	embedded *embedetcd.Server
	certs    *certReloader // nil: plain HTTP
	// dataDirLock keeps a second console off this one's data dir.
	dataDirLock *fileutil.LockedFile
	ui          *webui.UI
	prom        *signal.Prometheus
	opts        options
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	// deliveries joins the notification requests under way.
	deliveries interface{ Wait() }
}

// Option changes how a console starts (tests use them).
type Option func(*options)

type options struct {
	resolver *net.Resolver
	web      webui.Options
	jobs     []func(*Console) lead.Job
	now      func() time.Time
	// chainOnly: audit events skip the Merkle tree (WithoutAuditTree).
	chainOnly bool
}

// WithWebUI sets the web UI's options.
func WithWebUI(o webui.Options) Option { return func(x *options) { x.web = o } }

// WithJob adds a leader job besides the console's own, made once the
// console's service exists.
func WithJob(job func(*Console) lead.Job) Option {
	return func(x *options) { x.jobs = append(x.jobs, job) }
}

// WithoutAuditTree appends audit events to the hash chain only: the
// baseline of BenchmarkFlip's tree comparison (server.WithoutAuditTree).
func WithoutAuditTree() Option { return func(x *options) { x.chainOnly = true } }

// WithEgressResolver sets the resolver drill probes and webhook
// deliveries look names up with (tests make a name resolve to loopback).
func WithEgressResolver(r *net.Resolver) Option { return func(x *options) { x.resolver = r } }

// WithClock sets the clock the service and the leader jobs read.
func WithClock(now func() time.Time) Option { return func(x *options) { x.now = now } }

// Start opens everything the configuration names, starts the background
// jobs and begins serving. On error, whatever was started is stopped again,
// and the error is one line naming the setting to change.
func Start(ctx context.Context, cfg Config, log *slog.Logger, opts ...Option) (*Console, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("console: config: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Console{Config: cfg, log: log}
	for _, o := range opts {
		o(&c.opts)
	}
	if c.opts.now == nil {
		c.opts.now = time.Now
	}
	if err := c.open(ctx); err != nil {
		c.closeResources()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(3)
	go func() { defer c.wg.Done(); c.Scheduler.Run(runCtx) }()
	go func() { defer c.wg.Done(); c.Fleet.Run(runCtx, c.Etcd) }()
	go func() {
		defer c.wg.Done()
		l := c.listener
		if c.certs != nil {
			c.http.TLSConfig = c.certs.tlsConfig()
			l = tls.NewListener(l, c.http.TLSConfig)
		}
		if err := c.http.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("console: serve", "err", err)
		}
	}()
	return c, nil
}

// open acquires the console's resources in the order that fails fastest:
// the HTTP port and the data dir before the database and etcd. Whatever it
// acquired before an error stays in c for closeResources.
func (c *Console) open(ctx context.Context) error {
	cfg := c.Config
	var err error
	if c.listener, err = net.Listen("tcp", cfg.Listen); err != nil {
		return hint(fmt.Errorf("console: HTTP listener: %w", err), "change", "listen")
	}
	if cfg.TLSCert != "" {
		if c.certs, err = newCertReloader(cfg.TLSCert, cfg.TLSKey, c.log); err != nil {
			return hint(err, "check", "tls-cert")
		}
	}
	embedded := len(cfg.EtcdEndpoints) == 0
	if embedded || cfg.DatabaseURL == "" {
		if c.dataDirLock, err = lockDataDir(cfg.DataDir); err != nil {
			return hint(fmt.Errorf("console: data dir %s: %w", cfg.DataDir, err), "change", "data-dir")
		}
	}
	if c.DB, _, err = server.OpenDB(ctx, withConnectTimeout(cfg.DatabaseURL), cfg.DataDir); err != nil {
		if cfg.DatabaseURL == "" {
			return hint(fmt.Errorf("console: database %s: %w", server.DescribeDB("", cfg.DataDir), err), "change", "data-dir")
		}
		return hint(fmt.Errorf("console: database %s: %w", server.DescribeDB(cfg.DatabaseURL, ""), err), "check", "database-url")
	}
	endpoints := cfg.EtcdEndpoints
	if embedded {
		if c.embedded, err = c.startEmbeddedEtcd(); err != nil {
			return err
		}
		endpoints = []string{c.embedded.Endpoint}
	}
	if c.Etcd, err = EtcdClient(endpoints, cfg.Etcd); err != nil {
		return hint(fmt.Errorf("console: etcd client: %w", err), "check", "etcd-endpoints")
	}
	if c.Keys, err = LoadKeys(cfg); err != nil {
		return hint(fmt.Errorf("console: %w", err), "check", "secret-key-file")
	}
	if c.Egress, err = c.egressGuard(endpoints); err != nil {
		return hint(fmt.Errorf("console: %w", err), "change", "egress-allow")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := server.NewMetrics(reg)
	c.Publisher = server.NewPublisher(c.DB, c.Etcd, server.PublisherConfig{
		Namespace: cfg.Namespace, Wait: cfg.PublishWait, Logger: c.log, Metrics: metrics,
	})
	svcOpts := []server.ServiceOption{server.WithClock(c.opts.now), server.WithSelfApproval(cfg.SelfApproval), server.WithRequestTTL(cfg.RequestTTL)}
	if c.opts.chainOnly {
		svcOpts = append(svcOpts, server.WithoutAuditTree())
	}
	c.Service = server.NewService(c.DB, c.Publisher, svcOpts...)
	if c.GeneratedToken, err = c.Service.EnsureBootstrapToken(ctx, cfg.BootstrapToken); err != nil {
		return fmt.Errorf("console: bootstrap token: %w", err)
	}
	c.Fleet = fleet.New(fleet.Config{Namespace: cfg.Namespace, Now: c.opts.now, Logger: c.log,
		HistoryStep: cfg.FleetHistoryStep, HistoryLength: cfg.FleetHistory})
	// The history the leader kept: sparklines and fleet previews need not
	// wait hours after a restart. Without it the console still works.
	if n, err := c.Fleet.LoadHistory(ctx, c.DB); err != nil {
		c.log.Warn("console: fleet history not loaded; it starts empty", "err", err)
	} else {
		c.log.Debug("console: fleet history loaded", "frames", n)
	}
	c.Sources = signal.Sources{Fleet: c.Fleet.Source}
	if cfg.PrometheusURL != "" {
		if c.prom, err = signal.NewPrometheus(cfg.prometheus()); err != nil {
			return hint(fmt.Errorf("console: prometheus: %w", err), "change", "prometheus-url")
		}
		c.Sources.Prometheus = c.prom
	}
	id := cfg.ConsoleID
	if id == "" {
		host, _ := os.Hostname()
		id = host + "/" + c.listener.Addr().String()
	}
	c.Scheduler = lead.New(c.Etcd, c.Service, lead.Config{
		Namespace: cfg.Namespace, ID: id, SessionTTL: cfg.ElectionTTL, Now: c.opts.now, Logger: c.log,
		OnLeading: c.Publisher.SetLeading, JobPanics: metrics.JobPanics,
	})
	if err := c.addJobs(c.Publisher.PublishJob(0), c.Publisher.ReconcileJob(cfg.ReconcileInterval), c.Fleet.HistoryJob(c.Service)); err != nil {
		return err
	}
	for _, j := range c.opts.jobs {
		if err := c.addJobs(j(c)); err != nil {
			return err
		}
	}

	gin.SetMode(gin.ReleaseMode)
	c.Engine = gin.New()
	// Every request's context carries its deadline (api.Deadline), for the
	// API and the web UI alike; handlers pass c.Request.Context() on, never
	// the pooled gin context (a database goroutine may outlive the request).
	c.Engine.Use(gin.Recovery(), api.Deadline(cfg.RequestTimeout))
	if c.certs != nil {
		c.Engine.Use(hsts)
	}
	// Client addresses go into audit events: believe X-Forwarded-For only
	// from configured proxies.
	if err = c.Engine.SetTrustedProxies(cfg.TrustedProxies); err != nil {
		return hint(fmt.Errorf("console: trusted proxies: %w", err), "change", "trusted-proxies")
	}
	// No ReadTimeout or WriteTimeout: either would cut the web UI's event
	// streams, which stay open for minutes (a read deadline passing
	// mid-handler cancels the request's context).
	c.http = &http.Server{Handler: c.Engine, ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(c.log.Handler(), slog.LevelWarn)}
	apiDomains, webDomains, err := c.runDomains(c.domains(reg))
	if err != nil {
		return err
	}
	if err := c.startCheckpoints(ctx); err != nil {
		return err
	}
	api.Register(c.Engine, api.Config{Service: c.Service, Etcd: c.Etcd, Fleet: c.Fleet, Namespace: cfg.Namespace, Registry: reg, Logger: c.log, Domains: apiDomains})
	signIn, err := c.signIn()
	if err != nil {
		return err
	}
	c.ui = webui.New(webui.Deps{Service: c.Service, Fleet: c.Fleet, Etcd: c.Etcd, Namespace: cfg.Namespace, Logger: c.log, Domains: webDomains, SignIn: signIn}, c.opts.web)
	c.ui.Routes(c.Engine)
	return nil
}

// egressGuard is the guard of the requests made on users' behalf. The
// console's own listener, etcd (client and, embedded, peer) and database
// are refused whatever the allowlist does not name; loopback passes only
// when everything is embedded (the quickstart's demo runs beside the
// console), which Describe says.
func (c *Console) egressGuard(etcd []string) (*egress.Guard, error) {
	cfg := c.Config
	protected := append([]string{c.listener.Addr().String()}, etcd...)
	if len(cfg.EtcdEndpoints) == 0 {
		protected = append(protected, cfg.EmbeddedEtcdPeer)
	}
	if cfg.DatabaseURL != "" {
		protected = append(protected, cfg.DatabaseURL)
	}
	return egress.New(egress.Config{Allow: cfg.EgressAllow, Protected: protected, AllowLoopback: c.allEmbedded(), Resolver: c.opts.resolver})
}

// LoadKeys reads the configured key file; without one, on the embedded
// defaults, it makes (once) and reads <data-dir>/secret.key. Elsewhere
// without one it returns nil: secrets are stored as given.
func LoadKeys(cfg Config) (*seal.Keyring, error) {
	if cfg.SecretKeyFile != "" {
		return seal.Load(cfg.SecretKeyFile)
	}
	if len(cfg.EtcdEndpoints) == 0 && cfg.DatabaseURL == "" {
		k, _, err := seal.Ensure(filepath.Join(cfg.DataDir, "secret.key"))
		return k, err
	}
	return nil, nil
}

// allEmbedded reports whether the console runs on its embedded defaults:
// etcd and SQLite in the data dir.
func (c *Console) allEmbedded() bool {
	return len(c.Config.EtcdEndpoints) == 0 && c.Config.DatabaseURL == ""
}

// EtcdClient is the console's etcd client (also its commands'): TLS and
// credentials from sec. With a user name, etcd's client authenticates
// before it returns, so a console with auth on needs etcd at start.
func EtcdClient(endpoints []string, sec sdk.EtcdSecurity) (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialKeepAliveTime: 5 * time.Second, DialKeepAliveTimeout: 3 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(etcdReconnect)},
	}
	if err := sec.Apply(&cfg); err != nil {
		return nil, err
	}
	return clientv3.New(cfg)
}

// etcdReconnect is how the console's etcd client retries a lost connection:
// within a quarter second, so a leader is elected and the outbox published
// right after an etcd outage (gRPC's default backoff grows to two minutes,
// which left the console offline for seconds after etcd was back). A few
// consoles dialling four times a second cost etcd nothing.
var etcdReconnect = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 250 * time.Millisecond},
	MinConnectTimeout: 5 * time.Second,
}

// startEmbeddedEtcd starts the embedded etcd; its error names the URL
// setting whose port is taken, if that is what failed.
func (c *Console) startEmbeddedEtcd() (*embedetcd.Server, error) {
	cfg := c.Config
	srv, err := embedetcd.Start(embedetcd.Config{
		Dir: filepath.Join(cfg.DataDir, "etcd"), ClientURL: cfg.EmbeddedEtcdURL, PeerURL: cfg.EmbeddedEtcdPeer,
	})
	if err == nil {
		return srv, nil
	}
	err = fmt.Errorf("console: %w", err)
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "listen" {
		for _, u := range []struct{ url, flag string }{{cfg.EmbeddedEtcdURL, "embedded-etcd-client-url"}, {cfg.EmbeddedEtcdPeer, "embedded-etcd-peer-url"}} {
			if samePort(op.Addr, u.url) {
				return nil, fmt.Errorf("%w (another console on this host? change %s, or use a shared etcd with --etcd-endpoints)", err, settingName(u.flag))
			}
		}
	}
	return nil, hint(err, "check", "data-dir")
}

// samePort reports whether addr (a listener's address) has rawURL's port.
func samePort(addr net.Addr, rawURL string) bool {
	u, err := url.Parse(rawURL)
	tcp, ok := addr.(*net.TCPAddr)
	return err == nil && ok && u.Port() == strconv.Itoa(tcp.Port)
}

// hint appends the setting an operator can change to fix err:
// "… (change --listen or SWITCHYARD_LISTEN)".
func hint(err error, verb, flagName string) error {
	return fmt.Errorf("%w (%s %s)", err, verb, settingName(flagName))
}

// lockDataDir creates dir if needed and locks it for this console, so a
// bad --data-dir fails here with its name rather than deep inside SQLite or
// etcd, and a second console on the same data dir fails at once: the
// embedded etcd would otherwise wait forever on its database's file lock.
// The lock file holds the owner's pid.
func lockDataDir(dir string) (*fileutil.LockedFile, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "console.lock")
	f, err := fileutil.TryLockFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if errors.Is(err, fileutil.ErrLocked) {
		owner, _ := os.ReadFile(path)
		return nil, fmt.Errorf("in use by another console (pid %s holds %s)", strings.TrimSpace(string(owner)), path)
	}
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// withConnectTimeout bounds each connection attempt to Postgres at 10 s
// unless the URL sets connect_timeout itself: without it a database host
// that drops packets holds the start (and every reconnect) for minutes.
func withConnectTimeout(dbURL string) string {
	u, err := url.Parse(dbURL)
	if dbURL == "" || err != nil || u.Query().Has("connect_timeout") {
		return dbURL
	}
	q := u.Query()
	q.Set("connect_timeout", "10")
	u.RawQuery = q.Encode()
	return u.String()
}

// Addr is the address the API listens on.
func (c *Console) Addr() string { return c.listener.Addr().String() }

// URL is the base URL of the API (https:// when the console serves TLS).
func (c *Console) URL() string {
	if c.certs != nil {
		return "https://" + c.Addr()
	}
	return "http://" + c.Addr()
}

// Describe prints where the console listens and what it uses.
func (c *Console) Describe(w io.Writer) {
	etcd := "embedded etcd at " + c.Config.EmbeddedEtcdURL + " (data in " + filepath.Join(c.Config.DataDir, "etcd") + ")"
	if c.embedded == nil {
		etcd = fmt.Sprintf("etcd %v", c.Config.EtcdEndpoints)
	}
	fmt.Fprintf(w, "switchyard console listening on %s\n", c.URL())
	// The Prometheus URL carries no credentials (Validate refuses them).
	prom := cmp.Or(c.Config.PrometheusURL, "none (the fleet is the only metric source; set --prometheus-url)")
	fmt.Fprintf(w, "  namespace:  %s\n  etcd:       %s\n  prometheus: %s\n  database:   %s\n", c.Config.Namespace, etcd, prom, server.DescribeDB(c.Config.DatabaseURL, c.Config.DataDir))
	if c.GeneratedToken != "" {
		fmt.Fprintf(w, "  bootstrap admin token (shown once, store it now): %s\n", c.GeneratedToken)
	}
	if c.Keys == nil {
		fmt.Fprintf(w, "  secrets:   NOT sealed at rest: set --secret-key-file or SWITCHYARD_SECRET_KEY_FILE (see docs/production.md)\n")
	}
	if c.Egress != nil && c.Egress.AllowsLoopback() {
		fmt.Fprintf(w, "  egress:    loopback allowed for drill probes and webhooks (all-embedded mode); this console's own listener and etcd stay refused\n")
	}
}

// Shutdown stops serving (in-flight requests finish within ctx), gives up
// the election (its session's lease is revoked, so a follower takes over at
// once), and closes etcd and the database; an embedded etcd ends its
// clients' watches rather than waiting for them. A scheduler still stuck
// on an unreachable etcd when ctx ends is cut off by closing the etcd
// client: etcd's campaign cleanup waits on nothing but the client's own
// context.
func (c *Console) Shutdown(ctx context.Context) error {
	// The web UI's event streams end first: they would hold up the
	// graceful shutdown of the HTTP server.
	c.ui.Close()
	err := c.http.Shutdown(ctx)
	c.cancel()
	stopped := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		c.Etcd.Close()
		<-stopped
	}
	c.joinDeliveries(ctx)
	c.closeResources()
	return err
}

// joinDeliveries waits, as long as ctx allows, for the notification
// requests under way: each records its outcome in the database, which
// must still be open then. The term has ended, so their fenced writes
// fail; the next leader sends them again (receivers drop duplicates by
// their idempotency key).
func (c *Console) joinDeliveries(ctx context.Context) {
	if c.deliveries == nil {
		return
	}
	done := make(chan struct{})
	go func() { c.deliveries.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		c.log.Warn("console: shutdown did not wait for the notification requests under way", "err", ctx.Err())
	}
}

// addJobs registers leader jobs on the scheduler.
func (c *Console) addJobs(jobs ...lead.Job) error {
	for _, j := range jobs {
		if err := c.Scheduler.Add(j); err != nil {
			return fmt.Errorf("console: %w", err)
		}
	}
	return nil
}

func (c *Console) closeResources() {
	if c.ui != nil {
		c.ui.Close()
	}
	if c.prom != nil {
		c.prom.CloseIdleConnections()
	}
	if c.listener != nil {
		c.listener.Close() // already closed after a serve; needed after a failed start
	}
	if c.Etcd != nil {
		c.Etcd.Close()
	}
	if c.embedded != nil {
		c.embedded.Close()
	}
	if c.DB != nil {
		if db, err := c.DB.DB(); err == nil {
			db.Close()
		}
	}
	if c.dataDirLock != nil {
		c.dataDirLock.Close()
	}
}
