package server

import (
	"context"
	"errors"
	"fmt"
)

// FieldErrors collects the field errors of one request: every bad field,
// each once (the first problem found for a field is the one to fix). Every
// resource validates into one, so an answer lists all that is wrong with
// the request — unknown members, wrong types, ranges and references alike.
type FieldErrors []*FieldError

// Add records msg for field unless field already has an error.
func (v *FieldErrors) Add(field, msg string) {
	if v.Has(field) {
		return
	}
	*v = append(*v, &FieldError{Field: field, Msg: msg})
}

// Addf is Add with a formatted message.
func (v *FieldErrors) Addf(field, format string, args ...any) {
	v.Add(field, fmt.Sprintf(format, args...))
}

// AddErr records err: the fields of a ValidationError, of a FieldError or
// of joined errors, each prefixed with prefix; any other error under
// prefix itself.
func (v *FieldErrors) AddErr(prefix string, err error) {
	if err == nil {
		return
	}
	var joined interface{ Unwrap() []error }
	var ve *ValidationError
	var fe *FieldError
	switch {
	case errors.As(err, &joined):
		for _, e := range joined.Unwrap() {
			v.AddErr(prefix, e)
		}
	case errors.As(err, &ve):
		for _, f := range ve.Fields {
			v.Add(joinPath(prefix, f.Field), f.Msg)
		}
	case errors.As(err, &fe):
		v.Add(joinPath(prefix, fe.Field), fe.Msg)
	default:
		v.Add(prefix, err.Error())
	}
}

// Has reports whether field has an error.
func (v FieldErrors) Has(field string) bool {
	for _, e := range v {
		if e.Field == field {
			return true
		}
	}
	return false
}

// Err returns the collected errors as a ValidationError, or nil.
func (v FieldErrors) Err() error {
	if len(v) == 0 {
		return nil
	}
	return &ValidationError{Fields: v}
}

type inputErrorsKey struct{}

// WithInputErrors returns ctx carrying the errors found decoding a
// request's body (DecodeJSON). The request goes on to be validated, so one
// answer lists these with every other bad field; the change path refuses
// to write while they are pending (see record).
func WithInputErrors(ctx context.Context, errs FieldErrors) context.Context {
	if len(errs) == 0 {
		return ctx
	}
	return context.WithValue(ctx, inputErrorsKey{}, errs)
}

// InputErrors returns a copy of the decoding errors ctx carries.
func InputErrors(ctx context.Context) FieldErrors {
	errs, _ := ctx.Value(inputErrorsKey{}).(FieldErrors)
	return append(FieldErrors(nil), errs...)
}

// MergeInputErrors returns err with the decoding errors of ctx in front
// when err is a ValidationError (or when ctx carries errors and err is
// nil); any other error is returned as it is.
func MergeInputErrors(ctx context.Context, err error) error {
	v := InputErrors(ctx)
	var ve *ValidationError
	if len(v) == 0 || (err != nil && !errors.As(err, &ve)) {
		return err
	}
	v.AddErr("", err)
	return v.Err()
}
