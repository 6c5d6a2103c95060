// Command console runs the Switchyard console: the JSON API, the web UI and
// the leader-only publisher and reconciler. With no flags it starts an
// embedded etcd and an embedded SQLite database under ./data.
//
//	console                                  serve (flags: console -h)
//	console audit verify                     verify the audit hash chain
//	console audit export --format jsonl|csv  write the audit log to stdout
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/console"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "console:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := console.DefaultConfig()
	if err := cfg.FromEnv(); err != nil {
		return err
	}
	if len(args) > 0 && args[0] == "audit" {
		return auditCommand(cfg, args[1:])
	}
	fs := flag.NewFlagSet("console", flag.ContinueOnError)
	cfg.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c, err := console.Start(ctx, cfg, log, mounts...)
	if err != nil {
		return err
	}
	c.Describe(os.Stdout)
	<-ctx.Done()
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	return c.Shutdown(sctx)
}

// mounts are extra route sets (the web UI) added by other files.
var mounts []console.Mount

func auditCommand(cfg console.Config, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: console audit verify | console audit export --format jsonl|csv")
	}
	fs := flag.NewFlagSet("audit "+args[0], flag.ContinueOnError)
	fs.StringVar(&cfg.DatabaseURL, "database-url", cfg.DatabaseURL, "postgres:// URL (empty: SQLite in the data dir)")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "data directory of the embedded SQLite database")
	format := fs.String("format", audit.FormatJSONL, "export format: jsonl or csv")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	ctx := context.Background()
	if cfg.DatabaseURL == "" {
		// Opening a missing SQLite file would create an empty log that
		// verifies: a wrong --data-dir must not look like a clean chain.
		path := server.SQLitePath(cfg.DataDir)
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("no database at %s (pass --data-dir or --database-url): %w", path, err)
		}
	}
	db, _, err := server.OpenDB(ctx, cfg.DatabaseURL, cfg.DataDir)
	if err != nil {
		return err
	}
	switch args[0] {
	case "verify":
		res, err := audit.Verify(ctx, db)
		if err != nil {
			return err
		}
		if !res.OK() {
			return res.Mismatch
		}
		fmt.Printf("audit chain ok: %d events, head %s\n", res.Events, res.HeadHash)
		return nil
	case "export":
		return audit.Export(ctx, db, os.Stdout, *format, audit.Filter{})
	}
	return fmt.Errorf("unknown audit command %q", args[0])
}
