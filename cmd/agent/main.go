// Command agent is the per-host Switchyard sidecar: it keeps one app's
// switches and limit rules (watched in etcd, mirrored to a disk snapshot)
// and serves them to non-Go processes over a local JSON HTTP API. See
// internal/agent for the API and docs/agent.md for usage.
//
//	agent --app checkout --etcd-endpoints http://etcd:2379 --labels zone=a
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/switchyard-io/switchyard/internal/agent"
)

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
		err = agent.Run(ctx, cfg, log)
		stop()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

// parseConfig builds the configuration from defaults, the SWITCHYARD_*
// environment and then flags, and validates it. Flag errors and -h write
// their usage text to usage.
func parseConfig(args []string, getenv func(string) string, usage io.Writer) (agent.Config, error) {
	cfg := agent.DefaultConfig()
	if err := cfg.LoadEnv(getenv); err != nil {
		return cfg, err
	}
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(usage)
	cfg.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return cfg, cfg.Validate()
}
