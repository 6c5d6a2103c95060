package console

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/server/checkpoint"
)

// auditKeyName is the signing key's file in the data dir by default.
const auditKeyName = "audit-signing.key"

// startCheckpoints brings the audit tree up to the chain (a database older
// than the tree) and registers the checkpoint signer with the console's
// key. Without a key file the console signs no checkpoints and says so:
// on the embedded defaults it generates one in the data dir; elsewhere
// several consoles must share one key, so none is made up.
func (c *Console) startCheckpoints(ctx context.Context) error {
	if _, err := audit.SyncTree(ctx, c.DB); err != nil {
		return fmt.Errorf("console: audit tree: %w", err)
	}
	path := c.Config.AuditKeyFile
	if path == "" {
		path = filepath.Join(c.Config.DataDir, auditKeyName)
	}
	key, err := audit.LoadKey(path)
	origin := audit.Origin(c.Config.Namespace)
	switch {
	case err == nil:
	case !errors.Is(err, fs.ErrNotExist):
		return hint(fmt.Errorf("console: %w", err), "check", "audit-key-file")
	case c.Config.AuditKeyFile != "":
		return hint(fmt.Errorf("console: %w", err), "check", "audit-key-file")
	case c.Config.DatabaseURL == "":
		if key, err = audit.GenerateKeyFile(path, origin); err != nil {
			return hint(fmt.Errorf("console: %w", err), "check", "audit-key-file")
		}
		c.log.Info("generated the audit checkpoint signing key; give witnesses its public key", "file", path, "public", path+".pub")
	default:
		c.log.Warn("no audit checkpoint signing key: the console signs no checkpoints", "want", path)
		return nil
	}
	c.AuditKey = key
	c.Scheduler.Add(checkpoint.New(c.Service, checkpoint.Config{
		Key: key, Origin: origin, Events: c.Config.CheckpointEvents, Interval: c.Config.CheckpointInterval, Logger: c.log,
	}))
	return nil
}
