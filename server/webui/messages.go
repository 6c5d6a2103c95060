package webui

import (
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/api"
)

// acceptsHTML reports whether the client asked for a page (a browser)
// rather than data.
func acceptsHTML(c *gin.Context) bool {
	return strings.Contains(c.GetHeader("Accept"), "text/html")
}

// message answers with one sentence: a page for a browser, a problem
// document for anything else (scripts, fetches, event streams).
func (h *handler) message(c *gin.Context, status int, title, sentence string) {
	if !acceptsHTML(c) {
		writeProblem(c, api.Problem{Type: "about:blank", Title: title, Status: status, Detail: sentence})
		return
	}
	setSecurityHeaders(c.Writer.Header())
	h.render(c, status, "message", &page{Title: title, Error: sentence})
}

// writeProblem writes p as the API writes its problem documents.
func writeProblem(c *gin.Context, p api.Problem) {
	p.Instance = c.Request.URL.Path
	p.RequestID = c.Writer.Header().Get("X-Request-ID")
	c.Header("Content-Type", api.ProblemContentType)
	c.AbortWithStatusJSON(p.Status, p)
}

// notFound answers a path no route matches. Gin keeps one such handler for
// the whole engine, so it answers for the API too: a browser asking for a
// /ui page gets a page, everyone else the API's problem document.
func (h *handler) notFound(c *gin.Context) {
	if !strings.HasPrefix(c.Request.URL.Path, Prefix+"/") || !acceptsHTML(c) {
		writeProblem(c, api.ProblemFor(server.ErrNotFound))
		return
	}
	// Signed in, the page keeps its navigation.
	if row, u, err := h.sessions.lookup(c); err == nil {
		c.Set(ctxSession, row)
		c.Set(ctxUser, u)
	}
	h.message(c, http.StatusNotFound, "Page not found", "There is no page at "+c.Request.URL.Path+".")
}

// notFoundError is server.ErrNotFound for what a page was about, so the
// page names it: "There is no switch checkout/recommend."
type notFoundError struct{ what string }

func (e *notFoundError) Error() string { return "webui: no " + e.what }

func (e *notFoundError) Unwrap() error { return server.ErrNotFound }

// missing names what was not found when err is server.ErrNotFound.
func missing(err error, what string) error {
	if errors.Is(err, server.ErrNotFound) {
		return &notFoundError{what: what}
	}
	return err
}

// canWriteAny reports whether the signed-in user may change some app:
// only they are offered create forms.
func canWriteAny(c *gin.Context) bool {
	u, _ := c.Get(ctxUser)
	user, _ := u.(*server.User)
	return writesSomeApp(user)
}

// writesSomeApp reports whether u is an admin or an operator with a grant.
func writesSomeApp(u *server.User) bool {
	return u != nil && (u.Role == server.RoleAdmin || (u.Role == server.RoleOperator && len(u.Grants()) > 0))
}

// checkGrant adds a field error when the signed-in user may not change
// app, so a create form that names another app keeps what was typed.
func checkGrant(c *gin.Context, fp *formParser, field, app string) {
	a := actor(c)
	if app == "" || a.CanWrite(app) {
		return
	}
	if a.Role == server.RoleOperator {
		fp.add(field, "you may not change app "+app+" (you may change: "+strings.Join(a.Apps, ", ")+")")
		return
	}
	fp.add(field, "role "+string(a.Role)+" may not change app "+app)
}
