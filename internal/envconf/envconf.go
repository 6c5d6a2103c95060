// Package envconf reads SWITCHYARD_* environment variables into the config
// structs of the binaries (console, agent), collecting every bad value
// instead of stopping at the first. Flags are applied afterwards and win.
package envconf

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"
)

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

// Err joins the errors of every variable that did not parse.
func (e *Env) Err() error { return errors.Join(e.errs...) }

// ListVar registers a flag that sets *dst from a comma-separated list.
func ListVar(fs *flag.FlagSet, dst *[]string, name, usage string) {
	fs.Func(name, usage, func(s string) error {
		*dst = SplitList(s)
		return nil
	})
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
