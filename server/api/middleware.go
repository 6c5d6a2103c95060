package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 1 << 20

const (
	ctxRequestID = "switchyard.request_id"
	ctxActor     = "switchyard.actor"
)

// requestID takes X-Request-ID from the client (if sane) or makes one, and
// echoes it in the response.
func requestID(c *gin.Context) {
	id := c.GetHeader("X-Request-ID")
	if id == "" || len(id) > 128 || strings.ContainsAny(id, "\r\n") {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	c.Set(ctxRequestID, id)
	c.Header("X-Request-ID", id)
	c.Next()
}

// newlineWriter remembers the last byte of the body written through it.
type newlineWriter struct {
	gin.ResponseWriter
	last byte
}

func (w *newlineWriter) Write(b []byte) (int, error) {
	if len(b) > 0 {
		w.last = b[len(b)-1]
	}
	return w.ResponseWriter.Write(b)
}

func (w *newlineWriter) WriteString(s string) (int, error) {
	if len(s) > 0 {
		w.last = s[len(s)-1]
	}
	return w.ResponseWriter.WriteString(s)
}

// trailingNewline ends every JSON answer (problem documents included) with
// a newline, as curl users and line-oriented tools expect: documents
// printed one after another stay one per line.
func trailingNewline(c *gin.Context) {
	w := &newlineWriter{ResponseWriter: c.Writer}
	c.Writer = w
	c.Next()
	mt, _, _ := mime.ParseMediaType(w.Header().Get("Content-Type"))
	if w.Size() > 0 && w.last != '\n' && (mt == "application/json" || mt == ProblemContentType) {
		_, _ = w.ResponseWriter.Write([]byte{'\n'})
	}
}

// Deadline bounds every request's context by d, so a database that stops
// answering (a lock held, a network black hole) turns into a 503 instead
// of a request that hangs; 0 leaves requests unbounded. Event streams
// (Accept: text/event-stream) are long-lived by design and exempt.
// Handlers see the deadline in c.Request.Context(), which is what they
// pass on.
func Deadline(d time.Duration) gin.HandlerFunc {
	return func(c *gin.Context) {
		if d <= 0 || strings.Contains(c.GetHeader("Accept"), "text/event-stream") {
			c.Next()
			return
		}
		ctx, cancel := context.WithTimeout(c.Request.Context(), d)
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}
}

// logFailures logs the cause of every 5xx answer: the problem document
// keeps it from the client, so the log is where on-call finds it.
func logFailures(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Next()
		if c.Writer.Status() < 500 {
			return
		}
		for _, e := range c.Errors {
			log.Error("api: request failed", "method", c.Request.Method, "path", c.Request.URL.Path,
				"status", c.Writer.Status(), "request_id", c.GetString(ctxRequestID), "err", e.Err)
		}
	}
}

// httpMetrics counts requests and their latency by route.
type httpMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_http_requests_total", Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "switchyard_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route", "method"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.latency)
	}
	return m
}

func (m *httpMetrics) handle(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	m.requests.WithLabelValues(route, c.Request.Method, strconv.Itoa(c.Writer.Status())).Inc()
	m.latency.WithLabelValues(route, c.Request.Method).Observe(time.Since(start).Seconds())
}

// authenticate resolves the bearer token into an actor or answers 401.
func authenticate(svc *server.Service) gin.HandlerFunc {
	return func(c *gin.Context) {
		// The scheme is case-insensitive (RFC 9110 §11.1).
		scheme, secret, ok := strings.Cut(c.GetHeader("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			fail(c, server.ErrUnauthorized)
			return
		}
		a, err := svc.Authenticate(c.Request.Context(), strings.TrimSpace(secret))
		if err != nil {
			fail(c, err)
			return
		}
		a.RequestID = c.GetString(ctxRequestID)
		a.RemoteAddr = c.ClientIP()
		c.Set(ctxActor, a)
		c.Next()
	}
}

func actor(c *gin.Context) server.Actor {
	a, _ := c.Get(ctxActor)
	return a.(server.Actor)
}

// checkApp validates the :app path parameter.
func checkApp(c *gin.Context) {
	if !wire.ValidApp(c.Param("app")) {
		fail(c, &server.ValidationError{Fields: []*server.FieldError{{Field: "app", Msg: "must match ^[a-z0-9][a-z0-9._-]{0,62}$"}}})
		return
	}
	c.Next()
}

// bind reads a JSON body strictly into v: the media type must be JSON, the
// body at most 1 MiB, and unknown fields are refused. It answers the
// problem itself and returns false on failure.
func bind(c *gin.Context, v any) bool {
	errs, err := readJSON(c, v)
	if err == nil {
		err = errs.Err()
	}
	if err != nil {
		fail(c, err)
		return false
	}
	return true
}

// bindAll is bind for a create, a patch or a preview, whose service goes
// on to check the values: unknown members and members of the wrong type do
// not stop the request but travel in its context (server.WithInputErrors),
// so one answer lists them with the service's own errors. The change path
// refuses to write while they are pending; a handler whose service writes
// nothing (a preview) ends with refusePending.
func bindAll(c *gin.Context, v any) bool {
	errs, err := readJSON(c, v)
	if err != nil {
		fail(c, err)
		return false
	}
	c.Request = c.Request.WithContext(server.WithInputErrors(c.Request.Context(), errs))
	return true
}

// refusePending answers the decoding errors a bindAll let through, if
// any, and reports whether it did.
func refusePending(c *gin.Context) bool {
	if err := server.MergeInputErrors(c.Request.Context(), nil); err != nil {
		fail(c, err)
		return true
	}
	return false
}

// readJSON decodes the body into v as far as it can (server.DecodeJSON)
// and returns the members it could not take; err is a body that is not a
// JSON document of the allowed media type and size.
func readJSON(c *gin.Context, v any) (server.FieldErrors, error) {
	mt, _, err := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if err != nil || (mt != "application/json" && !(mt == MergePatchContentType && c.Request.Method == http.MethodPatch)) {
		return nil, errMediaType
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errTooLarge
		}
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, &server.ValidationError{Fields: []*server.FieldError{{Field: "body", Msg: "is empty; send a JSON object"}}}
	}
	errs := server.DecodeJSON(body, v)
	if errs.Has("body") {
		return nil, errs.Err()
	}
	return errs, nil
}
