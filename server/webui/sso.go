package webui

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/notify"
	"github.com/switchyard-io/switchyard/server/oidc"
)

// Single sign-on pages: "Sign in with …" leaves for the identity provider
// (/ui/login/oidc), which sends the browser back to the callback
// (/ui/login/oidc/callback). Between the two the flow (state, nonce, PKCE
// verifier, where to go next) lives in a short-lived cookie scoped to
// those two paths.

// SignIn is how people sign in.
type SignIn struct {
	// SSO is the identity provider; nil: local accounts only.
	SSO *oidc.Provider
	// RedirectURL is the callback registered at the identity provider
	// ("" : this console's own URL as the browser reached it).
	RedirectURL string
	// Local says who may sign in with a password while SSO is set:
	// LocalAll, LocalAdmins or LocalBreakGlass.
	Local string
}

// Who may sign in with a local account while single sign-on is set.
const (
	LocalAll        = "all"         // every local account (the default)
	LocalAdmins     = "admins"      // local admins only
	LocalBreakGlass = "break-glass" // local admins, only while the identity provider is unreachable
)

const (
	ssoPath   = Prefix + "/login/oidc"
	ssoCookie = "sy_sso"
	ssoMaxAge = 10 * time.Minute
)

func (h *handler) redirectURL(c *gin.Context) string {
	if h.signInCfg.RedirectURL != "" {
		return h.signInCfg.RedirectURL
	}
	scheme := "http"
	if isTLS(c) {
		scheme = "https"
	}
	return scheme + "://" + c.Request.Host + ssoPath + "/callback"
}

// ssoStart sends the browser to the identity provider.
func (h *handler) ssoStart(c *gin.Context) {
	sso := h.signInCfg.SSO
	f := oidc.NewFlow(safeNext(c.Query("next")))
	to, err := sso.AuthURL(c.Request.Context(), f, h.redirectURL(c))
	if err != nil {
		h.log.Warn("webui: single sign-on unavailable", "err", err)
		h.renderLogin(c, http.StatusServiceUnavailable, sso.Name()+" does not answer, so single sign-on is unavailable; try again in a moment.")
		return
	}
	b, _ := json.Marshal(f)
	http.SetCookie(c.Writer, &http.Cookie{
		Name: ssoCookie, Value: base64.RawURLEncoding.EncodeToString(b), Path: ssoPath, MaxAge: int(ssoMaxAge / time.Second),
		// Lax: the identity provider's redirect back is a top-level
		// navigation from its site.
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: isTLS(c),
	})
	c.Redirect(http.StatusSeeOther, to)
}

// ssoCallback finishes the flow: the identity provider's answer is
// checked, the user recorded with the role the rules give, and a session
// started.
func (h *handler) ssoCallback(c *gin.Context) {
	sso := h.signInCfg.SSO
	http.SetCookie(c.Writer, &http.Cookie{Name: ssoCookie, Path: ssoPath, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: isTLS(c)})
	if e := c.Query("error"); e != "" {
		h.refuse(c, http.StatusUnauthorized, sso.Name()+" did not sign you in: "+cleanText(e+" "+c.Query("error_description")))
		return
	}
	var f oidc.Flow
	ck, err := c.Request.Cookie(ssoCookie)
	if err == nil {
		var b []byte
		if b, err = base64.RawURLEncoding.DecodeString(ck.Value); err == nil {
			err = json.Unmarshal(b, &f)
		}
	}
	if err != nil {
		h.refuse(c, http.StatusBadRequest, "This sign-in was not started here or took longer than 10 minutes; sign in again.")
		return
	}
	id, err := sso.Finish(c.Request.Context(), f, c.Query("state"), c.Query("code"), h.redirectURL(c))
	var refusal *oidc.Refusal
	switch {
	case errors.As(err, &refusal):
		// Someone who had a role here and lost every mapped group loses
		// their sessions too.
		if u, err := h.svc.UserBySubject(c.Request.Context(), refusal.Issuer, refusal.Subject); err == nil {
			if err := endSessions(h.sessions.db.WithContext(c.Request.Context()), u.ID); err != nil {
				h.log.Error("webui: end the sessions of a refused user", "user", u.Username, "err", err)
			}
		}
		h.refuse(c, http.StatusForbidden, refusal.Msg)
		return
	case errors.Is(err, oidc.ErrUnreachable):
		h.refuse(c, http.StatusServiceUnavailable, sso.Name()+" does not answer; try again in a moment.")
		return
	case err != nil:
		h.log.Warn("webui: single sign-on refused", "err", err, "remote", c.ClientIP())
		h.refuse(c, http.StatusUnauthorized, "The answer of "+sso.Name()+" could not be verified, so you are not signed in; sign in again. If it keeps failing, tell an administrator the time of this attempt.")
		return
	}
	u, err := h.svc.SignInSSO(c.Request.Context(), id, c.ClientIP())
	switch {
	case errors.Is(err, server.ErrForbidden):
		h.refuse(c, http.StatusForbidden, "Your account is disabled on this console; ask an administrator.")
		return
	case err != nil:
		h.log.Error("webui: record single sign-on", "err", err)
		h.refuse(c, http.StatusServiceUnavailable, "Could not record your sign-in; try again.")
		return
	}
	if err := h.sessions.start(c, u); err != nil {
		h.refuse(c, http.StatusServiceUnavailable, "Could not start a session; try again.")
		return
	}
	c.Redirect(http.StatusSeeOther, safeNext(f.Next))
}

// refuse answers a sign-in that did not happen: nothing was created.
func (h *handler) refuse(c *gin.Context, status int, msg string) {
	h.render(c, status, "refused", &page{Title: "Not signed in", Error: msg, Apps: []string{}})
}

// cleanText keeps what an identity provider sends back printable and
// short before it is shown.
func cleanText(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, strings.TrimSpace(s))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// localAllowed says why u may not sign in with a password while single
// sign-on is set ("" : they may).
func (h *handler) localAllowed(c *gin.Context, u *server.User) string {
	cfg := h.signInCfg
	if cfg.SSO == nil || cfg.Local == LocalAll || cfg.Local == "" {
		return ""
	}
	if u.Role != server.RoleAdmin {
		return "Local accounts are for break-glass: only administrators sign in with a password here. Use “Sign in with " + cfg.SSO.Name() + "”."
	}
	if cfg.Local == LocalBreakGlass && cfg.SSO.Reachable(c.Request.Context()) {
		return cfg.SSO.Name() + " answers, so sign in with it: local accounts work only while it is unreachable."
	}
	return ""
}

// recordLocal audits a password sign-in while single sign-on is set and
// notifies every channel that listens for it.
func (h *handler) recordLocal(c *gin.Context, u *server.User, reason string) error {
	now := h.svc.Now()
	return h.svc.LocalSignIn(c.Request.Context(), u, c.ClientIP(), reason, func(tx *gorm.DB) error {
		return notify.Enqueue(tx, notify.Event{
			Key: fmt.Sprintf("signin/%s@%d", u.Username, now.UnixNano()), Kind: notify.SignInLocal, Target: u.Target(),
			Title: fmt.Sprintf("Break-glass: %s signed in with a local password", u.Username),
			Body:  "Reason: " + strings.TrimSpace(reason) + " · from " + c.ClientIP(),
			Data:  map[string]any{"user": u.Username, "role": u.Role, "remote_addr": c.ClientIP(), "reason": strings.TrimSpace(reason)},
			At:    now,
		})
	})
}
