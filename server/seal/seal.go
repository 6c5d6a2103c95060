// Package seal encrypts the secrets the console keeps in its database —
// webhook channel secrets, drill probe header values — with AES-256-GCM
// under keys kept outside the database, in a key file
// (SWITCHYARD_SECRET_KEY_FILE; on the embedded defaults one is generated
// into the data dir).
//
// A key file holds one key per line, "<id>:<base64 of 32 bytes>"; '#'
// starts a comment. The first key seals; every key opens, so a rotation
// adds a new first line, re-seals (`console secrets rotate`) and later
// drops the old line. A sealed value names its key:
// "sealed:v1:<id>:<base64 of nonce and ciphertext>".
//
// The package never logs, and its errors never carry, a plaintext.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Prefix opens every sealed value.
const Prefix = "sealed:v1:"

// Keyring seals with its first key and opens with any. A nil *Keyring
// seals nothing: Seal and Open return their input.
type Keyring struct {
	primary string
	aeads   map[string]cipher.AEAD
}

// Load reads a key file.
func Load(path string) (*Keyring, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("seal: key file: %w", err)
	}
	k := &Keyring{aeads: map[string]cipher.AEAD{}}
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, enc, ok := strings.Cut(line, ":")
		raw, err := base64.StdEncoding.DecodeString(enc)
		if !ok || id == "" || strings.ContainsAny(id, ": ") || err != nil || len(raw) != 32 {
			return nil, fmt.Errorf("seal: key file %s line %d: want <id>:<base64 of 32 bytes>", path, n+1)
		}
		if _, dup := k.aeads[id]; dup {
			return nil, fmt.Errorf("seal: key file %s line %d: key id %q given twice", path, n+1, id)
		}
		block, _ := aes.NewCipher(raw)
		k.aeads[id], _ = cipher.NewGCM(block)
		if k.primary == "" {
			k.primary = id
		}
	}
	if k.primary == "" {
		return nil, fmt.Errorf("seal: key file %s holds no key", path)
	}
	return k, nil
}

// NewKeyLine returns a fresh key file line with a random id.
func NewKeyLine() string {
	var key [32]byte
	var id [4]byte
	_, _ = rand.Read(key[:])
	_, _ = rand.Read(id[:])
	return "k" + hex.EncodeToString(id[:]) + ":" + base64.StdEncoding.EncodeToString(key[:])
}

// Ensure loads path, first writing a fresh key file there (mode 0600,
// written whole or not at all) when none exists; created reports that.
func Ensure(path string) (k *Keyring, created bool, err error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		tmp := path + ".tmp"
		content := "# Switchyard secret keys: the first line seals, every line opens. Keep a copy outside the data dir.\n" + NewKeyLine() + "\n"
		if err := writeSynced(tmp, []byte(content)); err != nil {
			return nil, false, fmt.Errorf("seal: key file: %w", err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return nil, false, fmt.Errorf("seal: key file: %w", err)
		}
		if d, err := os.Open(filepath.Dir(path)); err == nil {
			_ = d.Sync()
			d.Close()
		}
		created = true
	}
	k, err = Load(path)
	return k, created, err
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Primary is the id of the key that seals.
func (k *Keyring) Primary() string {
	if k == nil {
		return ""
	}
	return k.primary
}

// IsSealed reports whether s is a sealed value.
func IsSealed(s string) bool { return strings.HasPrefix(s, Prefix) }

// Seal encrypts plain under the first key. An empty value stays empty.
func (k *Keyring) Seal(plain string) string {
	if k == nil || plain == "" {
		return plain
	}
	aead := k.aeads[k.primary]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	_, _ = rand.Read(nonce)
	out := aead.Seal(nonce, nonce, []byte(plain), []byte(k.primary))
	return Prefix + k.primary + ":" + base64.RawStdEncoding.EncodeToString(out)
}

// Open decrypts a sealed value; a value that is not sealed (stored before
// sealing was on) is returned as it is.
func (k *Keyring) Open(s string) (string, error) {
	if !IsSealed(s) {
		return s, nil
	}
	if k == nil {
		return "", errors.New("seal: a sealed value but no key file (set SWITCHYARD_SECRET_KEY_FILE)")
	}
	id, enc, ok := strings.Cut(strings.TrimPrefix(s, Prefix), ":")
	aead := k.aeads[id]
	if !ok || aead == nil {
		return "", fmt.Errorf("seal: the value is sealed with key %q, which the key file does not hold", id)
	}
	raw, err := base64.RawStdEncoding.DecodeString(enc)
	if err != nil || len(raw) < aead.NonceSize() {
		return "", errors.New("seal: a sealed value is damaged")
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(id))
	if err != nil {
		return "", fmt.Errorf("seal: a value sealed with key %q does not open (damaged, or another key of that id)", id)
	}
	return string(plain), nil
}

// Reseal opens s and seals it under the first key; changed is false when
// s already was.
func (k *Keyring) Reseal(s string) (out string, changed bool, err error) {
	if k == nil || s == "" {
		return s, false, nil
	}
	if strings.HasPrefix(s, Prefix+k.primary+":") {
		return s, false, nil
	}
	plain, err := k.Open(s)
	if err != nil {
		return s, false, err
	}
	return k.Seal(plain), true, nil
}
