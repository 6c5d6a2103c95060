package envconf

import (
	"flag"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestEnv(t *testing.T) {
	vars := map[string]string{"S": "x", "L": " a, b,,c ", "D": "1m", "BAD": "soon", "BAD2": "later"}
	e := New(func(k string) string { return vars[k] })
	s, l, d, keep := "default", []string{"z"}, time.Second, "kept"
	var bad, bad2 time.Duration
	e.String("S", &s)
	e.String("UNSET", &keep)
	e.List("L", &l)
	e.Duration("D", &d)
	e.Duration("BAD", &bad)
	e.Duration("BAD2", &bad2)
	if s != "x" || keep != "kept" || !slices.Equal(l, []string{"a", "b", "c"}) || d != time.Minute {
		t.Fatalf("got %q %q %v %v", s, keep, l, d)
	}
	err := e.Err()
	if err == nil || !strings.Contains(err.Error(), "BAD:") || !strings.Contains(err.Error(), "BAD2:") {
		t.Fatalf("errors of both bad variables expected, got %v", err)
	}
}

// TestSecret: a secret comes from its variable or from the file its _FILE
// names, without the trailing newline; both set, an unreadable or an empty
// file is an error naming the variable (and the path), never the value.
func TestSecret(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	vars := map[string]string{
		"PLAIN":      "from-env",
		"FROM_FILE":  "",
		"CRLF_FILE":  file("crlf", "line\r\n"),
		"BOTH":       "s3cret-value",
		"BOTH_FILE":  file("both", "s3cret-file\n"),
		"GONE_FILE":  filepath.Join(dir, "missing"),
		"EMPTY_FILE": file("empty", "\n"),
	}
	vars["FROM_FILE_FILE"] = file("secret", "s3cret from file\n")
	e := New(func(k string) string { return vars[k] })
	got := map[string]string{}
	for _, name := range []string{"PLAIN", "FROM_FILE", "CRLF", "BOTH", "GONE", "EMPTY", "UNSET"} {
		e.Secret(name, func(v string) error { got[name] = v; return nil })
	}
	if !maps.Equal(got, map[string]string{"PLAIN": "from-env", "FROM_FILE": "s3cret from file", "CRLF": "line"}) {
		t.Errorf("got %q", got)
	}
	msg := e.Err().Error()
	for _, want := range []string{
		"BOTH and BOTH_FILE are both set: set one",
		"GONE_FILE: open " + vars["GONE_FILE"] + ": no such file or directory",
		"EMPTY_FILE: " + vars["EMPTY_FILE"] + " is empty",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("errors lack %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "s3cret") {
		t.Errorf("an error shows a secret:\n%s", msg)
	}
}

// TestSecretFileFlag: --name-file sets the value from the file; giving
// --name too, or a file that cannot be read, fails naming the flags (and
// the path), never the value.
func TestSecretFileFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	newFlags := func(dst *string) *flag.FlagSet {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Func("token", "the token", func(v string) error { *dst = v; return nil })
		SecretFileVar(fs, funcValue(func(v string) error { *dst = v; return nil }), "token", "`file` holding the token")
		return fs
	}
	var token string
	if err := ParseFlags(newFlags(&token), []string{"--token-file", path}); err != nil || token != "s3cret-token" {
		t.Fatalf("--token-file: %q, %v", token, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--token", "s3cret-flag", "--token-file", path}, "--token and --token-file are both given: give one"},
		{[]string{"--token-file", path + ".gone"}, `invalid value "` + path + `.gone" for flag -token-file: no such file or directory`},
	} {
		err := ParseFlags(newFlags(&token), tc.args)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

type funcValue func(string) error

func (f funcValue) Set(v string) error { return f(v) }
func (f funcValue) String() string     { return "" }
