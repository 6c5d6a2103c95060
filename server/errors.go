package server

import (
	"errors"
	"fmt"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Sentinel errors; the API maps each to one status code.
var (
	ErrNotFound      = errors.New("server: not found")
	ErrConflict      = errors.New("server: conflict")
	ErrAlreadyExists = errors.New("server: already exists")
	ErrUnauthorized  = errors.New("server: missing or invalid credentials")
	ErrForbidden     = errors.New("server: forbidden")
	ErrUnavailable   = errors.New("server: database unavailable")
	// ErrEtcdUnavailable: what was asked is read from etcd, which did not
	// answer.
	ErrEtcdUnavailable = errors.New("server: etcd unavailable")
	// ErrRateLimited: the caller asked too often; try again later.
	ErrRateLimited = errors.New("server: too many requests")
)

// ExistsError is ErrAlreadyExists for a create whose name is taken; Field
// is the request field that holds the name ("name", "resource").
type ExistsError struct{ Field, Name string }

func (e *ExistsError) Error() string { return ErrAlreadyExists.Error() + ": " + e.Name }

func (e *ExistsError) Unwrap() error { return ErrAlreadyExists }

// StateError is ErrConflict about the state of an entity rather than its
// version ("the rule is not paused"): the request is well formed, but the
// entity is not in a state that allows it.
type StateError struct{ Msg string }

func (e *StateError) Error() string { return "server: " + e.Msg }

func (e *StateError) Unwrap() error { return ErrConflict }

// VersionError is ErrConflict for a change that named the version it
// expected (optimistic concurrency) when the entity is at another one:
// the caller read it before someone else changed it.
type VersionError struct {
	What              string // "version", "plan version"
	Expected, Current int64
}

func (e *VersionError) Error() string {
	if e.Current == 0 {
		return fmt.Sprintf("%s: %s %d is stale: it changed meanwhile", ErrConflict, e.What, e.Expected)
	}
	return fmt.Sprintf("%s: %s %d is stale, current is %d", ErrConflict, e.What, e.Expected, e.Current)
}

func (e *VersionError) Unwrap() error { return ErrConflict }

// ChangedConcurrently is the conflict of a guarded write that found its
// row changed since it was read: a VersionError when the caller named the
// version it expected, else a plain ErrConflict naming target.
func ChangedConcurrently(target string, expected *int64) error {
	if expected != nil {
		return &VersionError{What: "version", Expected: *expected}
	}
	return fmt.Errorf("%w: %s changed concurrently", ErrConflict, target)
}

// Conflictf returns a StateError.
func Conflictf(format string, args ...any) error {
	return &StateError{Msg: fmt.Sprintf(format, args...)}
}

// FieldError is a validation error that names the offending request field.
type FieldError = wire.FieldError

// ValidationError holds every field error found in one request.
type ValidationError struct {
	Fields []*FieldError
}

func (e *ValidationError) Error() string {
	if len(e.Fields) == 1 {
		return "invalid " + e.Fields[0].Error()
	}
	return fmt.Sprintf("invalid request: %d fields (%s, …)", len(e.Fields), e.Fields[0].Error())
}

// invalid returns a ValidationError for one field.
func invalid(field, msg string) error {
	return &ValidationError{Fields: []*FieldError{{Field: field, Msg: msg}}}
}
