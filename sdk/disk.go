package sdk

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Disk snapshot layout:
//
//	SWITCHYARD-SNAPSHOT\n
//	{"format":1,"namespace":…,"app":…,"revision":…,"written_at":…,"size":…,"sha256":…}\n
//	{"items":[{"key":…,"mod_revision":…,"value":{…}}, …]}
//
// The header's sha256 and size cover the body (everything after the header
// line); the header itself must be byte-for-byte canonical JSON. Items are the raw published switches and limit rules of the app
// and _global, never overrides.
const (
	snapshotMagic  = "SWITCHYARD-SNAPSHOT\n"
	snapshotFormat = 1
	// snapshotInterval is the minimum time between two snapshot writes.
	snapshotInterval = 100 * time.Millisecond
)

type snapshotHeader struct {
	Format    int       `json:"format"`
	Namespace string    `json:"namespace"`
	App       string    `json:"app"`
	Revision  int64     `json:"revision"`
	WrittenAt time.Time `json:"written_at"`
	Size      int       `json:"size"`
	SHA256    string    `json:"sha256"`
}

type snapshotBody struct {
	Items []snapshotItem `json:"items"`
}

type snapshotItem struct {
	Key         string          `json:"key"`
	ModRevision int64           `json:"mod_revision"`
	Value       json.RawMessage `json:"value"`
}

// SnapshotPath returns the disk snapshot file of (namespace, app) in dir.
func SnapshotPath(dir, namespace, app string) string {
	return filepath.Join(dir, namespace, app+".snapshot")
}

// encodeSnapshot serializes the persistent items of a state.
func encodeSnapshot(ns, app string, st *state, now time.Time) ([]byte, error) {
	body := snapshotBody{Items: make([]snapshotItem, 0, len(st.items))}
	for _, it := range st.items {
		if it.kind == wire.KindOverrides {
			continue
		}
		body.Items = append(body.Items, snapshotItem{Key: it.key, ModRevision: it.modRev, Value: it.value})
	}
	slices.SortFunc(body.Items, func(a, b snapshotItem) int { return strings.Compare(a.Key, b.Key) })
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	h, err := json.Marshal(snapshotHeader{
		Format: snapshotFormat, Namespace: ns, App: app, Revision: st.rev,
		WrittenAt: now.UTC(), Size: len(b), SHA256: hex.EncodeToString(sum[:]),
	})
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(snapshotMagic)+len(h)+1+len(b))
	out = append(out, snapshotMagic...)
	out = append(out, h...)
	out = append(out, '\n')
	return append(out, b...), nil
}

// decodeSnapshot checks a snapshot file's magic, header, owner and
// checksum and returns its header and items. Items are not decoded here:
// apply validates each one like a live value.
func decodeSnapshot(data []byte, ns, app string) (*snapshotHeader, []kvUpdate, error) {
	rest, ok := bytes.CutPrefix(data, []byte(snapshotMagic))
	if !ok {
		return nil, nil, errors.New("sdk: snapshot: bad magic")
	}
	line, body, ok := bytes.Cut(rest, []byte{'\n'})
	if !ok {
		return nil, nil, errors.New("sdk: snapshot: truncated header")
	}
	var h snapshotHeader
	if err := json.Unmarshal(line, &h); err != nil {
		return nil, nil, fmt.Errorf("sdk: snapshot: header: %w", err)
	}
	if h.Format != snapshotFormat {
		return nil, nil, fmt.Errorf("sdk: snapshot: unknown format %d", h.Format)
	}
	// The header is not covered by the checksum, so it must be exactly
	// what encodeSnapshot writes: any changed byte is corruption.
	if canon, err := json.Marshal(h); err != nil || !bytes.Equal(canon, line) {
		return nil, nil, errors.New("sdk: snapshot: header is not in canonical form (corrupt)")
	}
	if h.Namespace != ns || h.App != app {
		return nil, nil, fmt.Errorf("sdk: snapshot: belongs to %s/%s, not %s/%s", h.Namespace, h.App, ns, app)
	}
	if h.Size != len(body) {
		return nil, nil, fmt.Errorf("sdk: snapshot: body is %d bytes, header says %d", len(body), h.Size)
	}
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != h.SHA256 {
		return nil, nil, errors.New("sdk: snapshot: checksum mismatch")
	}
	var b snapshotBody
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, nil, fmt.Errorf("sdk: snapshot: body: %w", err)
	}
	ups := make([]kvUpdate, 0, len(b.Items))
	for _, it := range b.Items {
		pk, err := wire.ParseKey(ns, it.Key)
		if err != nil || pk.Kind == wire.KindOverrides || (pk.App != app && pk.App != wire.GlobalApp) {
			return nil, nil, fmt.Errorf("sdk: snapshot: foreign key %q", it.Key)
		}
		ups = append(ups, kvUpdate{key: it.Key, value: it.Value, modRev: it.ModRevision})
	}
	return &h, ups, nil
}

// loadSnapshot applies the disk snapshot, if a valid one exists. A
// missing file is normal; anything else wrong is logged and counted.
func (c *Client) loadSnapshot() {
	path := SnapshotPath(c.cfg.SnapshotDir, c.cfg.Namespace, c.cfg.App)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err == nil {
		var h *snapshotHeader
		var ups []kvUpdate
		if h, ups, err = decodeSnapshot(data, c.cfg.Namespace, c.cfg.App); err == nil {
			before := c.decodeErrors.Load()
			c.state.Store(&state{items: map[string]*item{}, index: map[string]uint32{},
				limits: map[string]*wire.LimitRule{}, dataAt: h.WrittenAt})
			c.apply(ups, false, h.Revision, SourceSnapshot)
			if n := c.decodeErrors.Load() - before; n > 0 {
				c.snapErrors.Add(1)
				c.log.Warn("disk snapshot had invalid items", "path", path, "invalid", n)
			}
			c.log.Info("loaded disk snapshot", "path", path, "revision", h.Revision, "items", len(ups), "written_at", h.WrittenAt)
			return
		}
	}
	c.snapErrors.Add(1)
	c.log.Error("ignoring unusable disk snapshot; starting from environment and defaults", "path", path, "err", err)
}

// diskWriter coalesces snapshot writes to at most one per
// snapshotInterval and writes a final one on close.
type diskWriter struct {
	c         *Client
	mu        sync.Mutex
	timer     *time.Timer
	pending   bool
	closed    bool
	last      time.Time
	written   *state
	writeMu   sync.Mutex
	wg        sync.WaitGroup
	writtenAt time.Time
	writes    atomic.Int64 // successful writes, for tests
}

func (d *diskWriter) init(c *Client) { d.c = c }

// schedule asks for a write of the current state.
func (d *diskWriter) schedule() {
	if d.c.cfg.SnapshotDir == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pending || d.closed {
		return
	}
	d.pending = true
	d.wg.Add(1)
	d.timer = time.AfterFunc(max(0, time.Until(d.last.Add(snapshotInterval))), func() {
		defer d.wg.Done()
		d.mu.Lock()
		d.pending = false
		d.last = time.Now()
		d.mu.Unlock()
		d.write()
	})
}

// close stops scheduling and flushes the latest live state.
func (d *diskWriter) close() {
	if d.c.cfg.SnapshotDir == "" {
		return
	}
	d.mu.Lock()
	d.closed = true
	if d.pending && d.timer.Stop() {
		d.pending = false
		d.wg.Done()
	}
	d.mu.Unlock()
	d.wg.Wait()
	d.write()
}

// write persists the current live state unless it was already written.
func (d *diskWriter) write() {
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	st := d.c.state.Load()
	if st.source != SourceLive || st == d.written {
		return
	}
	now := time.Now()
	data, err := encodeSnapshot(d.c.cfg.Namespace, d.c.cfg.App, st, now)
	if err == nil {
		err = writeFileAtomic(SnapshotPath(d.c.cfg.SnapshotDir, d.c.cfg.Namespace, d.c.cfg.App), data)
	}
	if err != nil {
		d.c.snapErrors.Add(1)
		d.c.log.Error("writing disk snapshot failed", "err", err)
		return
	}
	d.written = st
	d.writes.Add(1)
	d.writtenAt = now
}

// writeFileAtomic writes data to path through a synced temporary file,
// renames it into place and syncs the directory.
func writeFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	df, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer df.Close()
	return df.Sync()
}
