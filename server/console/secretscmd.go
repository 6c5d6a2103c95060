package console

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/switchyard-io/switchyard/internal/envconf"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/drill"
	"github.com/switchyard-io/switchyard/server/notify"
)

// SecretsCommand runs `console secrets rotate`: every sealed secret in the
// database (channel secrets; probe header values of drills and runs), and
// any stored before sealing was on, is sealed again under the key file's
// first key. Run it after adding a new first line to the key file; drop
// the old line once it reports nothing left to change.
func SecretsCommand(ctx context.Context, cfg Config, args []string, stdout io.Writer) error {
	const help = "console secrets -h"
	if len(args) == 0 || args[0] != "rotate" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprint(stdout, "Usage:\n  console secrets rotate [--secret-key-file F] [--database-url U | --data-dir D]\n")
			return flag.ErrHelp
		}
		return fmt.Errorf("secrets: name a command: rotate (see %s)", help)
	}
	fs := flag.NewFlagSet("console secrets rotate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.AddFlags(fs, "secret-key-file", "database-url", "data-dir")
	if err := envconf.ParseFlags(fs, args[1:]); err != nil {
		return fmt.Errorf("%w (see %s)", err, help)
	}
	keys, err := LoadKeys(cfg)
	if err != nil {
		return err
	}
	if keys == nil {
		return errors.New("secrets rotate: no key file: set --secret-key-file or SWITCHYARD_SECRET_KEY_FILE")
	}
	db, _, err := server.OpenDB(ctx, cfg.DatabaseURL, cfg.DataDir)
	if err != nil {
		return err
	}
	if sql, err := db.DB(); err == nil {
		defer sql.Close()
	}
	channels, err := notify.Reseal(ctx, db, keys)
	if err != nil {
		return fmt.Errorf("secrets rotate: %w", err)
	}
	drills, err := drill.Reseal(ctx, db, keys)
	if err != nil {
		return fmt.Errorf("secrets rotate: %w", err)
	}
	fmt.Fprintf(stdout, "sealed under key %s: %d channel secrets, %d drill and run specs\n", keys.Primary(), channels, drills)
	return nil
}
