package webui

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/server"
)

// Cookie and form names.
const (
	sessionCookie = "sy_session"
	loginCookie   = "sy_login_csrf"
	csrfField     = "_csrf"
	csrfHeader    = "X-CSRF-Token"
	ctxUser       = "webui.user"
	ctxSession    = "webui.session"
)

// session is a signed-in browser, stored by the SHA-256 of its cookie.
type session struct {
	IDHash     string `gorm:"primaryKey"`
	UserID     int64
	CSRFToken  string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	LastSeenAt time.Time
}

func (session) TableName() string { return "web_sessions" }

// sessions creates, finds and ends sessions. The web UI owns the
// web_sessions table; users are the service's.
type sessions struct {
	db   *gorm.DB
	svc  *server.Service
	ttl  time.Duration
	idle time.Duration
}

// endSessions ends every session of a user, inside the transaction that
// changes the user's credentials or powers (Service.OnCredentialsChange).
func endSessions(tx *gorm.DB, userID int64) error {
	return tx.Where("user_id = ?", userID).Delete(&session{}).Error
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func hashID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// start creates a session for u and sets its cookie.
func (s *sessions) start(c *gin.Context, u *server.User) error {
	id := randomToken()
	now := time.Now().UTC()
	row := &session{IDHash: hashID(id), UserID: u.ID, CSRFToken: randomToken(), CreatedAt: now, ExpiresAt: now.Add(s.ttl), LastSeenAt: now}
	// Expired sessions are swept whenever someone signs in.
	s.db.WithContext(c.Request.Context()).Where("expires_at < ?", now).Delete(&session{})
	if err := s.db.WithContext(c.Request.Context()).Create(row).Error; err != nil {
		return err
	}
	http.SetCookie(c.Writer, &http.Cookie{
		Name: sessionCookie, Value: id, Path: "/", Expires: row.ExpiresAt,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: isTLS(c),
	})
	return nil
}

// end deletes the request's session and clears the cookie.
func (s *sessions) end(c *gin.Context) {
	if ck, err := c.Request.Cookie(sessionCookie); err == nil {
		s.db.WithContext(c.Request.Context()).Where("id_hash = ?", hashID(ck.Value)).Delete(&session{})
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: sessionCookie, Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: isTLS(c)})
}

var errNoSession = errors.New("webui: not signed in")

// lookup finds the live session of the request and its user.
func (s *sessions) lookup(c *gin.Context) (*session, *server.User, error) {
	ck, err := c.Request.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return nil, nil, errNoSession
	}
	now := time.Now().UTC()
	var row session
	err = s.db.WithContext(c.Request.Context()).Where("id_hash = ? AND expires_at > ?", hashID(ck.Value), now).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil, errNoSession
	} else if err != nil {
		return nil, nil, err
	}
	if now.Sub(row.LastSeenAt) > s.idle {
		s.db.WithContext(c.Request.Context()).Where("id_hash = ?", row.IDHash).Delete(&session{})
		return nil, nil, errNoSession
	}
	u, err := s.svc.GetUser(c.Request.Context(), row.UserID)
	switch {
	case errors.Is(err, server.ErrNotFound) || (err == nil && u.Disabled()):
		return nil, nil, errNoSession
	case err != nil:
		return nil, nil, err
	}
	if now.Sub(row.LastSeenAt) > time.Minute {
		s.db.WithContext(c.Request.Context()).Model(&session{}).Where("id_hash = ?", row.IDHash).Update("last_seen_at", now)
	}
	return &row, u, nil
}

// requireSession lets signed-in users through. Others are sent to the
// sign-in page (GET) or refused with 401.
func (h *handler) requireSession(c *gin.Context) {
	row, u, err := h.sessions.lookup(c)
	if err != nil {
		switch {
		case !errors.Is(err, errNoSession):
			h.message(c, http.StatusServiceUnavailable, "Database unavailable", "The database did not answer, so your session could not be checked; try again in a moment.")
		case c.Request.Method == http.MethodGet && c.GetHeader("Accept") != "text/event-stream":
			c.Redirect(http.StatusSeeOther, Prefix+"/login?next="+url.QueryEscape(c.Request.URL.RequestURI()))
		default:
			h.message(c, http.StatusUnauthorized, "Not signed in", "You are not signed in (or your session ended); sign in again and repeat the change.")
		}
		c.Abort()
		return
	}
	c.Set(ctxSession, row)
	c.Set(ctxUser, u)
	c.Next()
}

// checkCSRF refuses a state-changing request unless it carries the
// session's CSRF token (form field _csrf or header X-CSRF-Token) and, when
// the browser names one, comes from our own origin.
func (h *handler) checkCSRF(c *gin.Context) {
	switch c.Request.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		c.Next()
		return
	}
	row := c.MustGet(ctxSession).(*session)
	if !sameOrigin(c) || !tokenEqual(submittedCSRF(c), row.CSRFToken) {
		h.message(c, http.StatusForbidden, "Form expired", "The form was refused because its security token is missing or out of date; reload the page and submit it again.")
		c.Abort()
		return
	}
	c.Next()
}

func submittedCSRF(c *gin.Context) string {
	if t := c.GetHeader(csrfHeader); t != "" {
		return t
	}
	return c.PostForm(csrfField)
}

func tokenEqual(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func sameOrigin(c *gin.Context) bool {
	o := c.GetHeader("Origin")
	if o == "" || o == "null" {
		return o == "" // "null" origins (sandboxed frames) are refused
	}
	u, err := url.Parse(o)
	return err == nil && strings.EqualFold(u.Host, c.Request.Host)
}

// safeNext keeps post-sign-in redirects on this site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix+"/") || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return Prefix + "/"
	}
	return next
}

func (h *handler) loginPage(c *gin.Context) {
	if _, _, err := h.sessions.lookup(c); err == nil {
		c.Redirect(http.StatusSeeOther, safeNext(c.Query("next")))
		return
	}
	h.renderLogin(c, http.StatusOK, "")
}

func (h *handler) renderLogin(c *gin.Context, status int, msg string) {
	tok := randomToken()
	http.SetCookie(c.Writer, &http.Cookie{
		Name: loginCookie, Value: tok, Path: Prefix + "/login", MaxAge: 1800,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: isTLS(c),
	})
	h.render(c, status, "login", &page{
		Title: "Sign in", CSRF: tok, Error: msg, Form: "login", Values: c.Request.PostForm,
		Apps: []string{}, Data: h.loginData(c),
	})
}

func (h *handler) loginData(c *gin.Context) map[string]any {
	d := map[string]any{"Next": safeNext(cmp.Or(c.PostForm("next"), c.Query("next"))), "FirstRun": h.firstRun(c)}
	if sso := h.signInCfg.SSO; sso != nil {
		d["SSO"], d["SSOName"] = true, sso.Name()
	}
	return d
}

// firstRun reports whether no user exists yet (the bootstrap token signs
// in as admin).
func (h *handler) firstRun(c *gin.Context) bool {
	n, err := h.svc.CountUsers(c.Request.Context())
	return err == nil && n == 0
}

// missingCredentials says what an empty sign-in form lacks.
func missingCredentials(username string, firstRun bool) string {
	switch {
	case username == "" && firstRun:
		return "No username given: sign in as admin with the bootstrap admin token as the password."
	case username == "":
		return "No username given: enter your username and password."
	case firstRun:
		return "No token given: enter the bootstrap admin token as the password."
	}
	return "No password given: enter your password."
}

func (h *handler) login(c *gin.Context) {
	ck, err := c.Request.Cookie(loginCookie)
	if err != nil || !tokenEqual(c.PostForm(csrfField), ck.Value) || !sameOrigin(c) {
		h.renderLogin(c, http.StatusForbidden, "The sign-in form had expired; sign in again.")
		return
	}
	username := strings.TrimSpace(c.PostForm("username"))
	if username == "" || c.PostForm("password") == "" {
		// Nothing to check: no attempt is spent, and the answer says what
		// is missing rather than "wrong".
		h.renderLogin(c, http.StatusBadRequest, missingCredentials(username, h.firstRun(c)))
		return
	}
	sso := h.signInCfg.SSO != nil
	reason := strings.TrimSpace(c.PostForm("reason"))
	if sso && reason == "" {
		h.renderLogin(c, http.StatusBadRequest, "No reason given: single sign-on is on, so a password sign-in is break-glass; say why you need it.")
		return
	}
	if ok, wait := h.signIn.admit(username, c.ClientIP()); !ok {
		secs := max(1, int(math.Ceil(wait.Seconds())))
		c.Header("Retry-After", strconv.Itoa(secs))
		h.renderLogin(c, http.StatusTooManyRequests, fmt.Sprintf("Too many sign-in attempts; try again in %d s.", secs))
		return
	}
	u, err := h.svc.SignIn(c.Request.Context(), username, c.PostForm("password"))
	if err != nil {
		msg := "Wrong username or password."
		if h.firstRun(c) {
			msg = "Wrong username or token: while no user exists, only admin signs in, with the bootstrap admin token."
		}
		status := http.StatusUnauthorized
		if errors.Is(err, server.ErrUnavailable) {
			msg, status = "The database is unavailable; try again.", http.StatusServiceUnavailable
		}
		h.renderLogin(c, status, msg)
		return
	}
	if sso {
		if why := h.localAllowed(c, u); why != "" {
			h.renderLogin(c, http.StatusForbidden, why)
			return
		}
		if err := h.recordLocal(c, u, reason); err != nil {
			var ve *server.ValidationError
			if errors.As(err, &ve) {
				h.renderLogin(c, http.StatusBadRequest, "The reason: "+ve.Error())
				return
			}
			h.renderLogin(c, http.StatusServiceUnavailable, "Could not record the break-glass sign-in; try again.")
			return
		}
	}
	if err := h.sessions.start(c, u); err != nil {
		h.renderLogin(c, http.StatusServiceUnavailable, "Could not start a session; try again.")
		return
	}
	c.Redirect(http.StatusSeeOther, safeNext(c.PostForm("next")))
}

func (h *handler) logout(c *gin.Context) {
	h.sessions.end(c)
	c.Redirect(http.StatusSeeOther, Prefix+"/login")
}

// actor is the signed-in user as the actor of a change.
func actor(c *gin.Context) server.Actor {
	a := c.MustGet(ctxUser).(*server.User).Actor()
	a.RequestID = c.Writer.Header().Get("X-Request-ID")
	a.RemoteAddr = c.ClientIP()
	return a
}
