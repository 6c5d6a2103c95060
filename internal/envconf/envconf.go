// Package envconf reads SWITCHYARD_* environment variables into the config
// structs of the binaries (console, agent), collecting every bad value
// instead of stopping at the first. Flags are applied afterwards and win.
//
// Secret settings are also read from files, the way the Postgres image
// does: NAME_FILE in the environment, --name-file on the command line.
package envconf

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
)

// FileSuffix turns a secret setting's variable into the one naming a
// file that holds it: SWITCHYARD_DATABASE_URL_FILE.
const FileSuffix = "_FILE"

// Env reads variables through get (os.Getenv in production, a map in
// tests). Unset or empty variables leave the destination unchanged.
type Env struct {
	get  func(string) string
	errs []error
}

// New returns an Env reading through get.
func New(get func(string) string) *Env { return &Env{get: get} }

// String sets *dst from variable name.
func (e *Env) String(name string, dst *string) {
	if v := e.get(name); v != "" {
		*dst = v
	}
}

// List sets *dst from a comma-separated variable, dropping empty items.
func (e *Env) List(name string, dst *[]string) {
	if v := e.get(name); v != "" {
		*dst = SplitList(v)
	}
}

// Duration sets *dst from a Go duration string ("30s").
func (e *Env) Duration(name string, dst *time.Duration) {
	e.Parse(name, func(v string) error {
		d, err := time.ParseDuration(v)
		*dst = d
		return err
	})
}

// Parse hands a set variable to parse and records its error, if any.
func (e *Env) Parse(name string, parse func(string) error) {
	if v := e.get(name); v != "" {
		if err := parse(v); err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s: %w", name, err))
		}
	}
}

// Secret sets a secret setting from variable name, or from the file named
// by name_FILE (see ReadSecret). Both set is an error naming both, so is a
// file that cannot be read; the value never appears in an error.
func (e *Env) Secret(name string, set func(string) error) {
	file := e.get(name + FileSuffix)
	switch {
	case file != "" && e.get(name) != "":
		e.errs = append(e.errs, fmt.Errorf("%s and %s are both set: set one", name, name+FileSuffix))
	case file != "":
		v, err := ReadSecret(file)
		if err == nil {
			err = set(v)
		}
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s: %w", name+FileSuffix, err))
		}
	default:
		e.Parse(name, set)
	}
}

// ReadSecret reads a secret from a file: its content without trailing
// newlines. An empty file is an error (a mounted secret with no key).
func ReadSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return v, nil
}

// Err joins the errors of every variable that did not parse.
func (e *Env) Err() error { return errors.Join(e.errs...) }

// ListVar registers a flag that sets *dst from a comma-separated list.
func ListVar(fs *flag.FlagSet, dst *[]string, name, usage string) {
	fs.Func(name, usage, func(s string) error {
		*dst = SplitList(s)
		return nil
	})
}

// SecretFileVar registers --<name>-file, which sets value from the file it
// names (see ReadSecret). ParseFlags refuses it beside --<name>.
func SecretFileVar(fs *flag.FlagSet, value flag.Value, name, usage string) {
	fs.Var(&fileValue{value: value}, name+"-file", usage)
}

// fileValue is the flag.Value of a --<name>-file flag.
type fileValue struct {
	value flag.Value
	path  string
}

func (f *fileValue) Set(path string) error {
	v, err := ReadSecret(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return pe.Err // the flag package's error names the flag and the path
		}
		return err
	}
	f.path = path
	return f.value.Set(v)
}

func (f *fileValue) String() string { return f.path }

// ParseFlags parses args into fs, then refuses a secret given on the
// command line both itself (--name) and as a file (--name-file).
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.Visit(func(f *flag.Flag) {
		if _, ok := f.Value.(*fileValue); ok {
			if name := strings.TrimSuffix(f.Name, "-file"); given[name] {
				errs = append(errs, fmt.Errorf("--%s and --%s are both given: give one", name, f.Name))
			}
		}
	})
	return errors.Join(errs...)
}

// SplitList splits "a, b,,c" into [a b c].
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
