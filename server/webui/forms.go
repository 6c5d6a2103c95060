package webui

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/api"
)

// failure is a service error as a page shows it: a status, the messages of
// the fields that caused it, and a message for the rest.
type failure struct {
	Status int
	Fields map[string]string
	Msg    string
}

// failureOf maps the service's typed errors for the browser: the status
// comes from the API's mapping, the words are for people.
func failureOf(err error) failure {
	p := api.ProblemFor(err)
	f := failure{Status: p.Status, Fields: map[string]string{}}
	switch p.Status {
	case http.StatusBadRequest:
		for _, fe := range p.Errors {
			if _, dup := f.Fields[fe.Field]; !dup {
				f.Fields[fe.Field] = fe.Msg
			}
		}
		f.Msg = "Fix the fields marked below."
	case http.StatusForbidden:
		f.Msg = "Not allowed: " + p.Detail
	case http.StatusConflict:
		f.Msg = "Someone else changed this meanwhile (" + p.Detail + "). Review the current state and submit again."
		if errors.Is(err, server.ErrAlreadyExists) {
			f.Msg, f.Fields[cmp.Or(p.Field, "name")] = p.Detail, "is taken"
		}
	case http.StatusNotFound:
		var nf *notFoundError
		if errors.As(err, &nf) {
			f.Msg = "There is no " + nf.what + "."
		} else {
			f.Msg = "Not found: " + strings.TrimPrefix(p.Detail, "not found: ") + "."
		}
	case http.StatusServiceUnavailable:
		f.Msg = "The database is unavailable; nothing was changed. Retry when it is back."
		if errors.Is(err, context.DeadlineExceeded) {
			// It may have struck during a commit: do not promise nothing changed.
			f.Msg = "The database did not answer in time. Check the current state before you retry."
		}
	default:
		f.Msg = "Internal error; nothing was changed."
	}
	return f
}

// fail attaches err to form on p and renders the page.
func (h *handler) fail(c *gin.Context, name string, p *page, form string, err error) {
	f := failureOf(err)
	if f.Status == http.StatusInternalServerError {
		h.log.Error("webui: change failed", "path", c.Request.URL.Path, "err", err)
	}
	if f.Status == http.StatusForbidden {
		// A forged or stale form of someone without the right: the form
		// itself is not on their page, so the page says it.
		form = "page"
	}
	p.Form, p.Errors, p.Error = form, f.Fields, f.Msg
	if p.Values == nil {
		_ = c.Request.ParseForm()
		p.Values = c.Request.PostForm
	}
	if form == "page" && p.Data == nil {
		// The page's own data could not be read (the database is away):
		// say so on a plain page rather than render the page without it.
		name = "message"
	}
	h.render(c, f.Status, name, p)
}

// formParser reads typed form values and collects field errors named like
// the API's fields.
type formParser struct {
	c *gin.Context
	// from, when set, holds the values instead of the posted form (a
	// draft carried in a URL's query).
	from url.Values
	errs server.FieldErrors
}

func (p *formParser) str(name string) string {
	if p.from != nil {
		return strings.TrimSpace(p.from.Get(name))
	}
	return strings.TrimSpace(p.c.PostForm(name))
}

// keys reads a pasted key list: keys separated by newlines, commas or
// spaces; empty entries are dropped.
func (p *formParser) keys(name string) []string {
	return strings.FieldsFunc(p.str(name), func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}

func (p *formParser) float(name string) float64 {
	s := p.str(name)
	if s == "" {
		return 0
	}
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil {
		p.add(name, "must be a number")
	}
	return v
}

func (p *formParser) int(name string) int {
	s := p.str(name)
	if s == "" {
		return 0
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		p.add(name, "must be a whole number")
	}
	return v
}

func (p *formParser) int64Ptr(name string) *int64 {
	s := p.str(name)
	if s == "" {
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		p.add(name, "must be a whole number")
		return nil
	}
	return &v
}

// list splits a comma- or space-separated field.
func (p *formParser) list(name string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(p.str(name), func(r rune) bool { return r == ',' || r == ' ' || r == '\n' }) {
		out = append(out, strings.TrimSpace(f))
	}
	return out
}

func (p *formParser) add(field, msg string) { p.errs.Add(field, msg) }

func (p *formParser) err() error { return p.errs.Err() }
