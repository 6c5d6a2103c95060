package audit

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
	"gorm.io/gorm"
)

// Checkpoint is a tree head in the C2SP tlog-checkpoint form: the log's
// origin, its size and its root. The body carries no time, so the
// cosignatures of several witnesses on one checkpoint combine.
type Checkpoint struct {
	Origin string
	Size   int64
	Root   tlog.Hash
}

// Origin is the checkpoint origin of the audit log of a namespace.
func Origin(namespace string) string { return "switchyard/" + namespace + "/audit" }

// Text is the checkpoint's signed body: origin, size and base64 root, one
// line each.
func (c Checkpoint) Text() string {
	return fmt.Sprintf("%s\n%d\n%s\n", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Root[:]))
}

// ParseCheckpoint parses a checkpoint body (Text); lines after the root
// (C2SP extension lines) are ignored.
func ParseCheckpoint(text string) (Checkpoint, error) {
	lines := strings.SplitN(text, "\n", 4)
	if len(lines) < 4 || lines[0] == "" {
		return Checkpoint{}, errors.New("audit: checkpoint: want origin, size and root lines")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return Checkpoint{}, fmt.Errorf("audit: checkpoint: bad size %q", lines[1])
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != len(tlog.Hash{}) {
		return Checkpoint{}, fmt.Errorf("audit: checkpoint: bad root %q", lines[2])
	}
	c := Checkpoint{Origin: lines[0], Size: size}
	copy(c.Root[:], root)
	return c, nil
}

// OpenCheckpoint verifies a signed checkpoint note against the trusted
// verifiers and parses it. An unknown or bad signature is a
// *note.UnverifiedNoteError or *note.InvalidSignatureError.
func OpenCheckpoint(msg []byte, known note.Verifiers) (Checkpoint, error) {
	n, err := note.Open(msg, known)
	if err != nil {
		return Checkpoint{}, err
	}
	return ParseCheckpoint(n.Text)
}

// Verifiers parses trusted verifier keys ("name+hash+base64"), as
// witnesses and offline verifiers are given them.
func Verifiers(keys []string) (note.Verifiers, error) {
	if len(keys) == 0 {
		return nil, errors.New("audit: no trusted key: pass the console's public key (--key)")
	}
	list := make([]note.Verifier, 0, len(keys))
	for _, k := range keys {
		v, err := note.NewVerifier(strings.TrimSpace(k))
		if err != nil {
			return nil, fmt.Errorf("audit: key %q: %w", k, err)
		}
		list = append(list, v)
	}
	return note.VerifierList(list...), nil
}

// Key is the console's checkpoint signing key and its public verifier key
// ("name+hash+base64", what witnesses pass as --key).
type Key struct {
	Signer   note.Signer
	Verifier string
}

// LoadKey reads a signing key file: one line, a sumdb/note private key
// ("PRIVATE+KEY+name+hash+base64").
func LoadKey(path string) (*Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit: signing key: %w", err)
	}
	skey := strings.TrimSpace(string(b))
	s, err := note.NewSigner(skey)
	if err != nil {
		return nil, fmt.Errorf("audit: signing key %s: %w", path, err)
	}
	vkey, err := verifierKey(skey)
	if err != nil {
		return nil, fmt.Errorf("audit: signing key %s: %w", path, err)
	}
	return &Key{Signer: s, Verifier: vkey}, nil
}

// verifierKey derives the public verifier key of a private key string.
func verifierKey(skey string) (string, error) {
	// PRIVATE+KEY+name+hash+alg||seed
	parts := strings.SplitN(skey, "+", 5)
	if len(parts) != 5 {
		return "", errors.New("malformed private key")
	}
	raw, err := base64.StdEncoding.DecodeString(parts[4])
	if err != nil || len(raw) != 1+32 || raw[0] != 1 {
		return "", errors.New("not an Ed25519 private key")
	}
	return note.NewEd25519VerifierKey(parts[2], ed25519.NewKeyFromSeed(raw[1:]).Public().(ed25519.PublicKey))
}

// GenerateKeyFile writes a new Ed25519 signing key named name to path
// (mode 0600, written atomically) and its verifier key to path + ".pub".
// It refuses to overwrite an existing key.
func GenerateKeyFile(path, name string) (*Key, error) {
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		return nil, fmt.Errorf("audit: generate signing key: %w", err)
	}
	if _, err := os.Stat(path); err == nil {
		return nil, fmt.Errorf("audit: signing key %s exists", path)
	}
	if err := WriteFileAtomic(path, []byte(skey+"\n"), 0o600); err != nil {
		return nil, err
	}
	if err := WriteFileAtomic(path+".pub", []byte(vkey+"\n"), 0o644); err != nil {
		return nil, err
	}
	return LoadKey(path)
}

// WriteFileAtomic writes a temporary file, syncs it, renames it over path
// and syncs the directory (the signing key; the witness's state).
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("audit: write %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("audit: write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// StoredCheckpoint is a signed checkpoint as the console keeps it.
type StoredCheckpoint struct {
	Size int64 `gorm:"primaryKey;autoIncrement:false" json:"size"`
	// Root is the tree root, base64 as in the checkpoint body.
	Root string `json:"root"`
	// Note is the signed checkpoint: what witnesses and receivers verify.
	Note string `json:"note"`
	// Key is the verifier key that signed it, kept so the checkpoint stays
	// verifiable after the signing key is rotated.
	Key       string    `json:"key"`
	CreatedAt time.Time `json:"created_at"`
}

func (StoredCheckpoint) TableName() string { return "audit_checkpoints" }

// SignCheckpoint signs a checkpoint of the whole log with key and stores
// it, inside tx. It returns nil when the log has not grown since the
// latest checkpoint (or is empty).
func SignCheckpoint(tx *gorm.DB, key *Key, origin string, now time.Time) (*StoredCheckpoint, error) {
	// The chain's lock keeps the head still while the root is read.
	if err := Lock(tx); err != nil {
		return nil, err
	}
	var head Event
	if err := tx.Order("id DESC").Limit(1).Find(&head).Error; err != nil {
		return nil, fmt.Errorf("audit: checkpoint: %w", err)
	}
	last, err := latestCheckpoint(tx)
	if err != nil {
		return nil, err
	}
	if head.ID == 0 || (last != nil && last.Size >= head.ID) {
		return nil, nil
	}
	root, err := tlog.TreeHash(head.ID, hashReader{tx})
	if errors.Is(err, ErrTreeBehind) {
		if _, err = syncTree(tx); err == nil {
			root, err = tlog.TreeHash(head.ID, hashReader{tx})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("audit: checkpoint: %w", err)
	}
	c := Checkpoint{Origin: origin, Size: head.ID, Root: root}
	msg, err := note.Sign(&note.Note{Text: c.Text()}, key.Signer)
	if err != nil {
		return nil, fmt.Errorf("audit: sign checkpoint: %w", err)
	}
	sc := &StoredCheckpoint{
		Size: c.Size, Root: base64.StdEncoding.EncodeToString(root[:]), Note: string(msg),
		Key: key.Verifier, CreatedAt: now.UTC(),
	}
	if err := tx.Create(sc).Error; err != nil {
		return nil, fmt.Errorf("audit: store checkpoint: %w", err)
	}
	return sc, nil
}

// LatestCheckpoint returns the newest stored checkpoint, or nil.
func LatestCheckpoint(ctx context.Context, db *gorm.DB) (*StoredCheckpoint, error) {
	return latestCheckpoint(db.WithContext(ctx))
}

func latestCheckpoint(db *gorm.DB) (*StoredCheckpoint, error) {
	var sc StoredCheckpoint
	if err := db.Order("size DESC").Limit(1).Find(&sc).Error; err != nil {
		return nil, fmt.Errorf("audit: latest checkpoint: %w", err)
	}
	if sc.Size == 0 {
		return nil, nil
	}
	return &sc, nil
}

// Checkpoints returns the stored checkpoints, oldest first.
func Checkpoints(ctx context.Context, db *gorm.DB) ([]StoredCheckpoint, error) {
	var out []StoredCheckpoint
	if err := db.WithContext(ctx).Order("size").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("audit: checkpoints: %w", err)
	}
	return out, nil
}
