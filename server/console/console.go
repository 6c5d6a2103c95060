package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/internal/embedetcd"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/api"
)

// Console is a running console.
type Console struct {
	Config    Config
	Service   *server.Service
	Scheduler *server.Scheduler
	Publisher *server.Publisher
	Etcd      *clientv3.Client
	DB        *gorm.DB
	Engine    *gin.Engine
	// GeneratedToken is the bootstrap admin token generated at this start,
	// or "" when one was configured or already existed.
	GeneratedToken string

	log      *slog.Logger
	listener net.Listener
	http     *http.Server
	embedded *embedetcd.Server
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// Mount adds routes (such as the web UI) to the console's engine.
type Mount func(r *gin.Engine, c *Console)

// Start opens everything the configuration names, starts the background
// jobs and begins serving. On error, whatever was started is stopped again.
func Start(ctx context.Context, cfg Config, log *slog.Logger, mounts ...Mount) (c *Console, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("console: config: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c = &Console{Config: cfg, log: log}
	defer func() {
		if err != nil {
			c.closeResources()
		}
	}()
	if c.DB, _, err = server.OpenDB(ctx, cfg.DatabaseURL, cfg.DataDir); err != nil {
		return nil, err
	}
	endpoints := cfg.EtcdEndpoints
	if len(endpoints) == 0 {
		c.embedded, err = embedetcd.Start(embedetcd.Config{
			Dir: filepath.Join(cfg.DataDir, "etcd"), ClientURL: cfg.EmbeddedEtcdURL, PeerURL: cfg.EmbeddedEtcdPeer,
		})
		if err != nil {
			return nil, err
		}
		endpoints = []string{c.embedded.Endpoint}
	}
	c.Etcd, err = clientv3.New(clientv3.Config{
		Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialKeepAliveTime: 5 * time.Second, DialKeepAliveTimeout: 3 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("console: etcd client: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := server.NewMetrics(reg)
	c.Publisher = server.NewPublisher(c.DB, c.Etcd, server.PublisherConfig{
		Namespace: cfg.Namespace, Wait: cfg.PublishWait, Logger: log, Metrics: metrics,
	})
	c.Service = server.NewService(c.DB, c.Publisher)
	if c.GeneratedToken, err = c.Service.EnsureBootstrapToken(ctx, cfg.BootstrapToken); err != nil {
		return nil, fmt.Errorf("console: bootstrap token: %w", err)
	}
	if c.listener, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("console: listen: %w", err)
	}
	id := cfg.ConsoleID
	if id == "" {
		host, _ := os.Hostname()
		id = host + "/" + c.listener.Addr().String()
	}
	c.Scheduler = server.NewScheduler(c.Etcd, c.Publisher, server.SchedulerConfig{
		Namespace: cfg.Namespace, ID: id, ReconcileInterval: cfg.ReconcileInterval, Logger: log,
	})

	gin.SetMode(gin.ReleaseMode)
	c.Engine = gin.New()
	// Every request's context carries its deadline (api.Deadline), for the
	// API and the web UI alike; handlers pass c.Request.Context() on, never
	// the pooled gin context (a database goroutine may outlive the request).
	c.Engine.Use(gin.Recovery(), api.Deadline(cfg.RequestTimeout))
	// Client addresses go into audit events: believe X-Forwarded-For only
	// from configured proxies.
	if err = c.Engine.SetTrustedProxies(cfg.TrustedProxies); err != nil {
		return nil, fmt.Errorf("console: trusted-proxies: %w", err)
	}
	// No ReadTimeout or WriteTimeout: either would cut the web UI's event
	// streams, which stay open for minutes (a read deadline passing
	// mid-handler cancels the request's context).
	c.http = &http.Server{Handler: c.Engine, ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	api.Register(c.Engine, api.Config{Service: c.Service, Etcd: c.Etcd, Namespace: cfg.Namespace, Registry: reg, Logger: log})
	for _, m := range mounts {
		m(c.Engine, c)
	}

	runCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(2)
	go func() { defer c.wg.Done(); c.Scheduler.Run(runCtx) }()
	go func() {
		defer c.wg.Done()
		if err := c.http.Serve(c.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("console: serve", "err", err)
		}
	}()
	return c, nil
}

// OnShutdown registers f to run when Shutdown begins, before in-flight
// requests are awaited: long-lived streams use it to end themselves.
func (c *Console) OnShutdown(f func()) { c.http.RegisterOnShutdown(f) }

// Addr is the address the API listens on.
func (c *Console) Addr() string { return c.listener.Addr().String() }

// URL is the base URL of the API.
func (c *Console) URL() string { return "http://" + c.Addr() }

// Describe prints where the console listens and what it uses.
func (c *Console) Describe(w io.Writer) {
	etcd := "embedded etcd at " + c.Config.EmbeddedEtcdURL + " (data in " + filepath.Join(c.Config.DataDir, "etcd") + ")"
	if c.embedded == nil {
		etcd = fmt.Sprintf("etcd %v", c.Config.EtcdEndpoints)
	}
	fmt.Fprintf(w, "switchyard console listening on %s\n", c.URL())
	fmt.Fprintf(w, "  namespace: %s\n  etcd:      %s\n  database:  %s\n", c.Config.Namespace, etcd, server.DescribeDB(c.Config.DatabaseURL, c.Config.DataDir))
	if c.GeneratedToken != "" {
		fmt.Fprintf(w, "  bootstrap admin token (shown once, store it now): %s\n", c.GeneratedToken)
	}
}

// Shutdown stops serving (in-flight requests finish within ctx), resigns
// the election, and closes etcd and the database. A scheduler still stuck
// on an unreachable etcd when ctx ends is cut off by closing the etcd
// client: etcd's campaign cleanup waits on nothing but the client's own
// context.
func (c *Console) Shutdown(ctx context.Context) error {
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
	c.closeResources()
	return err
}

func (c *Console) closeResources() {
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
}
