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
	"strconv"
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
//	<len(key)> <mod_revision> <len(value)>\n<key><value>\n   (one record per item)
//
// The header's sha256 and size cover the body (everything after the header
// line); the header itself must be byte-for-byte canonical JSON. Records
// hold the raw published values of the app's and _global's switches and
// limit rules, sorted by key, never overrides. Length-prefixed records keep
// a cold start from a 10,000-switch snapshot far below 50 ms.
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

// SnapshotPath returns the disk snapshot file of (namespace, app) in dir.
func SnapshotPath(dir, namespace, app string) string {
	return filepath.Join(dir, namespace, app+".snapshot")
}

// encodeSnapshot serializes the persistent items of a state.
func encodeSnapshot(ns, app string, st *state, now time.Time) ([]byte, error) {
	its := make([]*item, 0, len(st.items))
	size := 0
	for _, it := range st.items {
		if it.kind == wire.KindOverrides {
			continue
		}
		its = append(its, it)
		size += len(it.key) + len(it.value) + 32
	}
	slices.SortFunc(its, func(a, b *item) int { return strings.Compare(a.key, b.key) })
	b := make([]byte, 0, size)
	for _, it := range its {
		b = strconv.AppendInt(b, int64(len(it.key)), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, it.modRev, 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(len(it.value)), 10)
		b = append(b, '\n')
		b = append(b, it.key...)
		b = append(b, it.value...)
		b = append(b, '\n')
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
// checksum and returns its header and items. Values are not decoded here:
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
	allowed := snapshotPrefixes(ns, app)
	ups := make([]kvUpdate, 0, bytes.Count(body, []byte{'\n'})/2)
	for len(body) > 0 {
		line, rest, ok := bytes.Cut(body, []byte{'\n'})
		if !ok {
			return nil, nil, errors.New("sdk: snapshot: truncated record")
		}
		f := bytes.Fields(line)
		if len(f) != 3 {
			return nil, nil, fmt.Errorf("sdk: snapshot: bad record header %q", line)
		}
		kl, err1 := strconv.Atoi(string(f[0]))
		rev, err2 := strconv.ParseInt(string(f[1]), 10, 64)
		vl, err3 := strconv.Atoi(string(f[2]))
		if err1 != nil || err2 != nil || err3 != nil || kl <= 0 || vl < 0 || kl > len(rest) || vl > len(rest)-kl-1 || rest[kl+vl] != '\n' {
			return nil, nil, fmt.Errorf("sdk: snapshot: bad record header %q", line)
		}
		key := string(rest[:kl])
		if !hasAnyPrefix(key, allowed) {
			return nil, nil, fmt.Errorf("sdk: snapshot: foreign key %q", key)
		}
		ups = append(ups, kvUpdate{key: key, value: rest[kl : kl+vl : kl+vl], modRev: rev})
		body = rest[kl+vl+1:]
	}
	return &h, ups, nil
}

// snapshotPrefixes are the key prefixes a snapshot of (ns, app) may hold:
// switches and limits of app and _global.
func snapshotPrefixes(ns, app string) []string {
	return []string{
		wire.AppPrefix(ns, wire.KindSwitches, app), wire.AppPrefix(ns, wire.KindSwitches, wire.GlobalApp),
		wire.AppPrefix(ns, wire.KindLimits, app), wire.AppPrefix(ns, wire.KindLimits, wire.GlobalApp),
	}
}

func hasAnyPrefix(key string, prefixes []string) bool {
	for _, p := range prefixes {
		if len(key) > len(p) && key[:len(p)] == p {
			return true
		}
	}
	return false
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
// snapshotInterval and writes a final one on close. A failed write is
// retried with exponential backoff (capped at maxBackoff) until one
// succeeds, so a transient disk error does not leave an older snapshot on
// disk until the next change.
type diskWriter struct {
	c       *Client
	mu      sync.Mutex
	timer   *time.Timer
	pending bool
	closed  bool
	last    time.Time
	gap     time.Duration // minimum time between writes: snapshotInterval, more after failures
	written *state
	writeMu sync.Mutex
	wg      sync.WaitGroup
	writes  atomic.Int64 // successful writes, for tests
}

func (d *diskWriter) init(c *Client) { d.c, d.gap = c, snapshotInterval }

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
	d.timer = time.AfterFunc(max(0, time.Until(d.last.Add(d.gap))), func() {
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
	d.mu.Lock()
	if err != nil {
		d.gap = min(2*d.gap, maxBackoff)
	} else {
		d.gap = snapshotInterval
	}
	d.mu.Unlock()
	if err != nil {
		d.c.snapErrors.Add(1)
		d.c.log.Error("writing disk snapshot failed, will retry", "err", err)
		d.schedule()
		return
	}
	d.written = st
	d.writes.Add(1)
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
