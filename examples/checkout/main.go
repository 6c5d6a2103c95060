// Command checkout is the demo service of the compose stack: a small shop
// API that embeds the Switchyard SDK, so each degradation level can be
// seen working. Flip its switches in the console (app "checkout") and watch
// the answers change within milliseconds:
//
//	GET  /products/{id}   L1 "recommendations" serves the switch's fallback list,
//	                      L3 "reviews" leaves the reviews out
//	POST /orders          L4 "orders-read-only" answers 503 read_only,
//	                      L5 "orders-queue" answers 202 and applies the order later;
//	                      it needs an Idempotency-Key header (400 without one)
//	GET  /orders          reads keep working under L4 and L5
//
// The README's quickstart creates each switch and turns it on with curl.
//
// Limit rules published for "GET /products/{id}" or "POST /orders" are
// enforced by the same middleware (429 with Retry-After). Metrics are on
// /metrics.
//
//	go run ./examples/checkout --etcd-endpoints http://127.0.0.1:2379 --namespace default
//
// Every flag has a SWITCHYARD_* environment twin (flags win).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchyard-io/switchyard/internal/envconf"
	"github.com/switchyard-io/switchyard/sdk"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(os.Args[1:], os.Getenv, log); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "checkout:", err)
		os.Exit(1)
	}
}

// run parses the configuration, serves until SIGINT or SIGTERM, and shuts
// down gracefully.
func run(args []string, getenv func(string) string, log *slog.Logger) error {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("checkout", flag.ContinueOnError)
	listen := fs.String("listen", env("SWITCHYARD_LISTEN", "127.0.0.1:8070"), "HTTP listen address")
	endpoints := fs.String("etcd-endpoints", env("SWITCHYARD_ETCD_ENDPOINTS", "http://127.0.0.1:2379"), "comma-separated etcd endpoints (empty: offline, snapshot and environment only)")
	namespace := fs.String("namespace", env("SWITCHYARD_NAMESPACE", sdk.DefaultNamespace), "namespace the console publishes to")
	app := fs.String("app", env("SWITCHYARD_APP", "checkout"), "app name of this service")
	snapshotDir := fs.String("snapshot-dir", env("SWITCHYARD_SNAPSHOT_DIR", ""), "directory of the SDK's disk snapshot (empty: none)")
	if err := fs.Parse(args); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	client, err := sdk.New(ctx, sdk.Config{
		Endpoints:   envconf.SplitList(*endpoints),
		Namespace:   *namespace,
		App:         *app,
		SnapshotDir: *snapshotDir,
		Logger:      log,
		Registerer:  reg,
	})
	if err != nil {
		return err
	}
	defer client.Close()

	s := newShop(client, log)
	go s.run(ctx)
	mux := http.NewServeMux()
	mux.Handle("/", s.Handler())
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("checkout demo listening", "addr", *listen, "app", *app, "namespace", *namespace, "etcd", *endpoints)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}
