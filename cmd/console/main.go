// Command console runs the Switchyard console: the JSON API, the web UI and
// the leader-only publisher and reconciler. With no flags it starts an
// embedded etcd and an embedded SQLite database under ./data.
//
//	console                                  serve (flags: console -h)
//	console audit verify                     verify the audit hash chain
//	console audit export --format jsonl|csv  write the audit log to stdout
//	console audit witness --url … --state FILE --key PUBKEY
//	                                         check the log's latest checkpoint from outside
//	console etcd init-auth                   create etcd roles and users, enable auth
//	console secrets rotate                   seal every secret under the key file's first key
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
	"strings"
	"syscall"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/audit/witness"
	"github.com/switchyard-io/switchyard/internal/envconf"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/console"
)

func main() {
	err := run(os.Args[1:], os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return // the usage asked for is on stdout
	}
	if err != nil {
		// One line: every error of the console already names its cause and
		// the setting to change.
		fmt.Fprintln(os.Stderr, "console:", strings.TrimPrefix(err.Error(), "console: "))
		os.Exit(1)
	}
}

// run is the console command; help goes to stdout.
func run(args []string, stdout io.Writer) error {
	cfg := console.DefaultConfig()
	if err := cfg.FromEnv(); err != nil {
		return err
	}
	if len(args) > 0 && args[0] == "audit" {
		return auditCommand(cfg, args[1:], stdout)
	}
	if len(args) > 0 && args[0] == "secrets" {
		return console.SecretsCommand(context.Background(), cfg, args[1:], stdout)
	}
	if len(args) > 0 && args[0] == "etcd" {
		return console.EtcdCommand(context.Background(), cfg, os.Getenv, args[1:], stdout)
	}
	fs := flag.NewFlagSet("console", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned as one line; usage only on -h
	cfg.AddFlags(fs)
	if err := envconf.ParseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			writeUsage(stdout, fs, cfg)
		}
		return usageError(err, "console -h")
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (see console -h)", fs.Arg(0))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal kills a console stuck starting or stopping
	}()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c, err := console.Start(ctx, cfg, log)
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

// usageError passes -h through and points any other flag error at help.
func usageError(err error, help string) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return fmt.Errorf("%w (see %s)", err, help)
}

func writeUsage(w io.Writer, fs *flag.FlagSet, cfg console.Config) {
	fmt.Fprint(w, `Usage:
  console [flags]                   serve the JSON API, the web console and the leader's jobs
  console audit verify [flags]      verify the audit log's hash chain
  console audit export [flags]      write the audit log to stdout (--format jsonl|csv)
  console audit witness [flags]     check a console's latest audit checkpoint against the last one seen
  console etcd init-auth [flags]    create the namespace's etcd roles and users, enable auth
  console secrets rotate [flags]    seal every stored secret under the key file's first key

With no flags the console embeds etcd and SQLite in ./data and listens on
127.0.0.1:8080. Every flag has the SWITCHYARD_* environment variable named
in its description; a flag wins over its variable.

Flags:
`)
	writeFlags(w, fs)
	fmt.Fprint(w, "\nEnvironment only:\n")
	cfg.WriteEnvOnly(w)
	fmt.Fprint(w, "\nThe audit commands' flags: console audit -h\n")
}

// writeFlags lists fs's flags as --name, with their defaults.
func writeFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		if f.DefValue != "" {
			usage += fmt.Sprintf(" (default %q)", f.DefValue)
		}
		fmt.Fprintf(w, "  --%s %s\n    \t%s\n", f.Name, name, usage)
	})
}

func auditCommand(cfg console.Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("console audit", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.AddFlags(fs, "database-url", "data-dir")
	format := fs.String("format", audit.FormatJSONL, "export `format`: jsonl, csv, or bundle (the whole log and its signed checkpoints, for an offline verifier) (export only)")
	bundle := fs.String("bundle", "", "verify this exported bundle `file` offline, with the trusted --key, instead of the database (verify only)")
	var wcfg witness.Config
	fs.StringVar(&wcfg.URL, "url", "", "the console's base `URL` (witness only)")
	fs.StringVar(&wcfg.StateFile, "state", "", "`file` keeping the last checkpoint the witness accepted (witness only)")
	fs.Func("key", "trusted public `key` of the console's checkpoints, name+hash+base64; repeat it for the keys before a rotation (witness, verify --bundle)", func(k string) error {
		wcfg.Keys = append(wcfg.Keys, k)
		return nil
	})
	tokenFile := fs.String("token-file", "", "`file` holding an API token, any role; else $SWITCHYARD_TOKEN (witness only)")
	usage := func() {
		fmt.Fprint(stdout, `Usage:
  console audit verify [flags]   verify the audit log's hash chain, its Merkle tree and the stored
                                 checkpoints' roots; exits 1 at the first thing that does not match
  console audit export [flags]   write the audit log to stdout
  console audit witness [flags]  fetch a console's latest signed checkpoint, verify its signature
                                 (--key) and that it extends the one in --state, then keep it there;
                                 exits 1 with one line naming a bad signature, a truncated or
                                 rewritten log (consistency) or two roots for one size (split view)

verify and export read the console's database: --database-url, or the SQLite file in --data-dir;
verify --bundle FILE --key PUBKEY checks an export of --format bundle without it.
witness asks the console's API (--url) and needs no access to its database.

Flags:
`)
		writeFlags(stdout, fs)
	}
	parse := func(args []string) error {
		err := envconf.ParseFlags(fs, args)
		if errors.Is(err, flag.ErrHelp) {
			usage()
		}
		return err
	}
	if len(args) == 0 {
		return errors.New("audit: name a command, verify, export or witness (see console audit -h)")
	}
	cmd := args[0]
	if strings.HasPrefix(cmd, "-") { // flags before the command: only -h makes sense
		if err := parse(args); err != nil {
			return usageError(err, "console audit -h")
		}
		return errors.New("audit: name a command, verify, export or witness (see console audit -h)")
	}
	if cmd != "verify" && cmd != "export" && cmd != "witness" {
		return fmt.Errorf("audit: unknown command %q: verify, export or witness (see console audit -h)", cmd)
	}
	if err := parse(args[1:]); err != nil {
		return usageError(err, "console audit -h")
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("audit %s: unexpected argument %q (see console audit -h)", cmd, fs.Arg(0))
	}
	ctx := context.Background()
	if cmd == "witness" {
		return witnessCommand(ctx, wcfg, *tokenFile, stdout)
	}
	if cmd == "verify" && *bundle != "" {
		return verifyBundle(*bundle, wcfg.Keys, stdout)
	}
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
	if cmd == "export" {
		return audit.Export(ctx, db, stdout, *format, audit.Filter{})
	}
	res, err := audit.Verify(ctx, db)
	if err != nil {
		return err
	}
	return printVerified(stdout, res)
}

// printVerified reports a verification: its mismatch as the error, else
// what held.
func printVerified(stdout io.Writer, res audit.Result) error {
	if err := res.Err(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "audit chain ok: %d events, head %s\n", res.Events, res.HeadHash)
	fmt.Fprintf(stdout, "audit tree ok: root %s, %d checkpoints match\n", res.TreeRoot, res.Checkpoints)
	return nil
}

// verifyBundle verifies an exported bundle offline with the trusted keys.
func verifyBundle(path string, keys []string, stdout io.Writer) error {
	known, err := audit.Verifiers(keys)
	if err != nil {
		return fmt.Errorf("audit verify: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("audit verify: --bundle: %w", err)
	}
	defer f.Close()
	res, err := audit.VerifyBundle(f, known)
	if err != nil {
		return err
	}
	return printVerified(stdout, res)
}

// witnessCommand runs one witness check (audit/witness) and prints what it
// accepted; a refusal is the command's one-line error.
func witnessCommand(ctx context.Context, cfg witness.Config, tokenFile string, stdout io.Writer) error {
	if cfg.URL == "" || cfg.StateFile == "" || len(cfg.Keys) == 0 {
		return errors.New("audit witness: --url, --state and --key are required (see console audit -h)")
	}
	cfg.Token = os.Getenv("SWITCHYARD_TOKEN")
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return fmt.Errorf("audit witness: --token-file: %w", err)
		}
		cfg.Token = strings.TrimSpace(string(b))
	}
	res, err := witness.Run(ctx, cfg)
	if err != nil {
		return fmt.Errorf("audit witness: %w", err)
	}
	cp := res.Checkpoint
	switch {
	case res.Previous == nil:
		fmt.Fprintf(stdout, "audit witness ok: first checkpoint of %s kept: %d events, root %s\n", cp.Origin, cp.Size, cp.Root)
	case res.Previous.Size == cp.Size:
		fmt.Fprintf(stdout, "audit witness ok: %s unchanged: %d events, root %s\n", cp.Origin, cp.Size, cp.Root)
	default:
		fmt.Fprintf(stdout, "audit witness ok: %s grew from %d to %d events consistently, root %s\n", cp.Origin, res.Previous.Size, cp.Size, cp.Root)
	}
	return nil
}
