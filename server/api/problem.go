package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/signal"
)

// Problem is an RFC 9457 problem document. Field names the request field
// that caused it, when there is one; Errors lists every bad field.
type Problem struct {
	Type      string              `json:"type"`
	Title     string              `json:"title"`
	Status    int                 `json:"status"`
	Detail    string              `json:"detail,omitempty"`
	Instance  string              `json:"instance,omitempty"`
	Field     string              `json:"field,omitempty"`
	Errors    []server.FieldError `json:"errors,omitempty"`
	RequestID string              `json:"request_id,omitempty"`
}

// StatusClientClosedRequest is the status logged for a request whose
// client disconnected before the answer (nginx's 499).
const StatusClientClosedRequest = 499

// ConflictType is the problem type of every 409 about an entity's state
// or version (an existing name is /problems/exists).
const ConflictType = "/problems/conflict"

// MergePatchContentType is the media type of an RFC 7396 merge patch,
// what every PATCH takes (application/json is read the same way).
const MergePatchContentType = "application/merge-patch+json"

// ProblemContentType is the media type of problem documents.
const ProblemContentType = "application/problem+json"

// errTooLarge and errMediaType are request-shape errors found by the API itself.
var (
	errTooLarge  = errors.New("api: request body exceeds 1 MiB")
	errMediaType = errors.New("api: Content-Type must be application/json (or, for a PATCH, application/merge-patch+json)")
)

// ProblemFor maps an error to its problem document; this is the only place
// where errors become status codes (the web UI uses it too).
func ProblemFor(err error) Problem {
	var ve *server.ValidationError
	var verr *server.VersionError
	switch {
	case errors.Is(err, context.Canceled):
		// The client went away: nobody reads this answer, and it is not a
		// failure of the console (whatever the database call it cut short
		// says about itself).
		return Problem{Type: "/problems/client-closed", Title: "Client closed the request", Status: StatusClientClosedRequest}
	case errors.As(err, &ve):
		p := Problem{Type: "/problems/validation", Title: "Invalid request", Status: http.StatusBadRequest, Detail: ve.Error()}
		for _, f := range ve.Fields {
			p.Errors = append(p.Errors, *f)
		}
		p.Field = ve.Fields[0].Field
		return p
	case errors.Is(err, errTooLarge):
		return Problem{Type: "/problems/too-large", Title: "Request body too large", Status: http.StatusRequestEntityTooLarge, Detail: err.Error(), Field: "body"}
	case errors.Is(err, errMediaType):
		return Problem{Type: "/problems/media-type", Title: "Unsupported media type", Status: http.StatusUnsupportedMediaType, Detail: err.Error(), Field: "Content-Type"}
	case errors.Is(err, server.ErrUnauthorized):
		return Problem{Type: "/problems/unauthorized", Title: "Unauthorized", Status: http.StatusUnauthorized, Detail: "send Authorization: Bearer <token>", Field: "Authorization"}
	case errors.Is(err, server.ErrApprovalRequired):
		return Problem{Type: "/problems/approval-required", Title: "Approval required", Status: http.StatusConflict, Detail: Clean(err)}
	case errors.Is(err, server.ErrForbidden):
		return Problem{Type: "/problems/forbidden", Title: "Forbidden", Status: http.StatusForbidden, Detail: Clean(err)}
	case errors.Is(err, server.ErrRateLimited):
		return Problem{Type: "/problems/rate-limited", Title: "Too many requests", Status: http.StatusTooManyRequests, Detail: Clean(err)}
	case errors.Is(err, server.ErrNotFound):
		return Problem{Type: "/problems/not-found", Title: "Not found", Status: http.StatusNotFound, Detail: Clean(err)}
	case errors.Is(err, server.ErrConflict):
		// One problem for every conflict with the entity's state: a stale
		// version the request sent (field "version"), or a state that
		// does not allow the action (the detail names it).
		p := Problem{Type: ConflictType, Title: "Conflict", Status: http.StatusConflict, Detail: Clean(err)}
		if errors.As(err, &verr) {
			p.Field = "version"
		}
		return p
	case errors.Is(err, server.ErrAlreadyExists):
		p := Problem{Type: "/problems/exists", Title: "Already exists", Status: http.StatusConflict, Detail: Clean(err), Field: "name"}
		var ee *server.ExistsError
		if errors.As(err, &ee) {
			p.Field = ee.Field
		}
		return p
	case errors.Is(err, server.ErrUnavailable) && errors.Is(err, context.DeadlineExceeded):
		// The deadline may have struck while a commit was under way.
		return Problem{Type: "/problems/unavailable", Title: "Database did not answer in time", Status: http.StatusServiceUnavailable,
			Detail: "the database did not answer within the request timeout; read the current state (versions tell) before retrying a change"}
	case errors.Is(err, server.ErrUnavailable):
		return Problem{Type: "/problems/unavailable", Title: "Database unavailable", Status: http.StatusServiceUnavailable, Detail: "nothing was changed; retry when the database is back"}
	case errors.Is(err, signal.ErrUnavailable):
		return Problem{Type: "/problems/source-unavailable", Title: "Metric source unavailable", Status: http.StatusServiceUnavailable, Detail: Clean(err)}
	case errors.Is(err, server.ErrEtcdUnavailable):
		return Problem{Type: "/problems/etcd-unavailable", Title: "etcd unavailable", Status: http.StatusServiceUnavailable, Detail: Clean(err)}
	}
	return Problem{Type: "about:blank", Title: "Internal error", Status: http.StatusInternalServerError}
}

// Clean strips the package prefix from a typed error's message.
func Clean(err error) string { return strings.ReplaceAll(err.Error(), "server: ", "") }

// fail writes err as a problem document and aborts the request.
func fail(c *gin.Context, err error) {
	var held *server.ApprovalRequired
	if errors.As(err, &held) && held.Request != nil {
		// Not a failure: the change waits for approval as a request.
		c.AbortWithStatusJSON(http.StatusAccepted, heldAnswer(held))
		return
	}
	p := ProblemFor(server.MergeInputErrors(c.Request.Context(), err))
	p.Instance = c.Request.URL.Path
	p.RequestID = c.GetString(ctxRequestID)
	if p.Status == http.StatusUnauthorized {
		c.Header("WWW-Authenticate", `Bearer realm="switchyard"`)
	}
	if p.Status >= 500 {
		_ = c.Error(err)
	}
	c.Header("Content-Type", ProblemContentType)
	c.AbortWithStatusJSON(p.Status, p)
}
