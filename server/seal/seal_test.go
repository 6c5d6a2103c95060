package seal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func keyFile(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSealOpenRotate(t *testing.T) {
	a, b := NewKeyLine(), NewKeyLine()
	oldRing, err := Load(keyFile(t, "# comment", a))
	if err != nil {
		t.Fatal(err)
	}
	sealed := oldRing.Seal("hunter2-secret")
	if !IsSealed(sealed) || strings.Contains(sealed, "hunter2") || sealed == oldRing.Seal("hunter2-secret") {
		t.Fatalf("sealed %q: not sealed, or not randomised", sealed)
	}
	both, err := Load(keyFile(t, b, a))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := both.Open(sealed); err != nil || got != "hunter2-secret" {
		t.Fatalf("old ciphertext under the new key file: %q %v", got, err)
	}
	re, changed, err := both.Reseal(sealed)
	if err != nil || !changed || !strings.HasPrefix(re, Prefix+both.Primary()+":") {
		t.Fatalf("reseal: %q %v %v", re, changed, err)
	}
	if _, changed, _ := both.Reseal(re); changed {
		t.Fatal("resealing under the same key changed it")
	}
	newOnly, _ := Load(keyFile(t, b))
	if got, err := newOnly.Open(re); err != nil || got != "hunter2-secret" {
		t.Fatalf("resealed under the new key alone: %q %v", got, err)
	}
	if _, err := newOnly.Open(sealed); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("a value of a dropped key: %v", err)
	}
	tampered := re[:len(re)-2] + "AA"
	if _, err := newOnly.Open(tampered); err == nil {
		t.Fatal("a tampered value opened")
	}
	if got, _ := newOnly.Open("stored-before-sealing"); got != "stored-before-sealing" {
		t.Fatalf("a legacy value: %q", got)
	}
	if s := (*Keyring)(nil).Seal("x"); s != "x" {
		t.Fatalf("nil keyring sealed: %q", s)
	}
}

func TestLoadBadFiles(t *testing.T) {
	a := NewKeyLine()
	for name, content := range map[string]string{"empty": "# nothing\n", "short key": "k1:AAAA", "no id": ":" + strings.SplitN(a, ":", 2)[1], "duplicate": a + "\n" + a} {
		if _, err := Load(keyFile(t, content)); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

func TestEnsureGeneratesOnce(t *testing.T) {
	p := filepath.Join(t.TempDir(), "secret.key")
	k1, created, err := Ensure(p)
	if err != nil || !created {
		t.Fatalf("first: %v %v", created, err)
	}
	k2, created, err := Ensure(p)
	if err != nil || created || k1.Primary() != k2.Primary() {
		t.Fatalf("second: %v %v", created, err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
}
