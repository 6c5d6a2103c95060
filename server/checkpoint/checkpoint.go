// Package checkpoint is the leader job that signs checkpoints of the audit
// log's Merkle tree: every N events or T minutes, whichever comes first,
// it signs the tree's size and root with the console's key (sumdb/note,
// Ed25519), stores the checkpoint and sends it to the notification
// channels as an audit.checkpoint event, all in one fenced transaction.
// Witnesses and receivers keep the copies; see docs/audit.md.
//
// The key comes from a file outside the database and etcd: a database
// writer can rewrite the log but cannot sign a checkpoint of it.
package checkpoint

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/notify"
)

// Config configures the job; zero durations and counts take the defaults.
type Config struct {
	Key *audit.Key
	// Origin names the log in every checkpoint (audit.Origin(namespace)).
	Origin string
	// Events: a checkpoint once the log grew by this many events (default
	// 100). Interval: a checkpoint once this long passed since the last and
	// the log grew at all (default 10m).
	Events   int64
	Interval time.Duration
	// Poll is how often the leader looks (default 1s).
	Poll   time.Duration
	Logger *slog.Logger
}

// Job signs checkpoints; it is a lead.Job.
type Job struct {
	svc *server.Service
	cfg Config
}

// New returns the job on svc.
func New(svc *server.Service, cfg Config) *Job {
	if cfg.Events <= 0 {
		cfg.Events = 100
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Minute
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Job{svc: svc, cfg: cfg}
}

// Name implements lead.Job.
func (j *Job) Name() string { return "audit-checkpoint" }

// Every implements lead.Job.
func (j *Job) Every() time.Duration { return j.cfg.Poll }

// Step signs a checkpoint when one is due: the log grew by Events since
// the latest checkpoint, or grew at all and Interval has passed.
func (j *Job) Step(ctx context.Context, t server.Term, now time.Time) error {
	due, err := j.due(ctx, now)
	if err != nil || !due {
		return err
	}
	_, err = j.svc.InTerm(ctx, t, func(jt *server.JobTx) error {
		cp, err := audit.SignCheckpoint(jt.DB(), j.cfg.Key, j.cfg.Origin, now)
		if err != nil || cp == nil {
			return err
		}
		j.cfg.Logger.Info("audit checkpoint signed", "size", cp.Size, "root", cp.Root)
		return notify.Enqueue(jt.DB(), Event(j.cfg.Origin, cp))
	})
	return err
}

// due reads, outside any transaction, whether a checkpoint is due.
func (j *Job) due(ctx context.Context, now time.Time) (bool, error) {
	db := j.svc.DB().WithContext(ctx)
	size, err := audit.TreeSize(ctx, db)
	if err != nil {
		return false, err
	}
	last, err := audit.LatestCheckpoint(ctx, db)
	if err != nil {
		return false, err
	}
	if last == nil {
		return size > 0, nil
	}
	grown := size - last.Size
	return grown >= j.cfg.Events || (grown > 0 && now.Sub(last.CreatedAt) >= j.cfg.Interval), nil
}

// Event is the notification of a signed checkpoint: the note itself is in
// the body and the data, so a receiver can verify and keep it.
func Event(origin string, cp *audit.StoredCheckpoint) notify.Event {
	return notify.Event{
		Key:    fmt.Sprintf("audit/%s/checkpoint/%d", origin, cp.Size),
		Kind:   notify.AuditCheckpoint,
		Target: "audit/checkpoint/" + fmt.Sprint(cp.Size),
		Title:  fmt.Sprintf("Audit log checkpoint: %d events, root %s", cp.Size, cp.Root),
		Body:   cp.Note,
		Data:   map[string]any{"origin": origin, "size": cp.Size, "root": cp.Root, "note": cp.Note, "key": cp.Key},
		At:     cp.CreatedAt,
	}
}
