package webui

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
)

// adminPage shows users and API tokens; admins only.
func (h *handler) adminPage(c *gin.Context) { h.admin(c, http.StatusOK, "", nil, nil) }

// admin renders the admin page, with err attached to form and data merged
// into the page's data (the freshly minted token).
func (h *handler) admin(c *gin.Context, status int, form string, err error, extra map[string]any) {
	p := &page{Title: "Admin", Nav: "admin"}
	if !isAdmin(c) {
		h.render(c, http.StatusForbidden, "message", &page{Title: "Admins only", Error: "Only admins manage users and tokens."})
		return
	}
	users, _, uerr := h.svc.ListUsers(c.Request.Context(), server.Page{})
	tokens, _, terr := h.svc.ListTokens(c.Request.Context(), server.Page{})
	data := map[string]any{"Users": users, "Tokens": tokens}
	for k, v := range extra {
		data[k] = v
	}
	p.Data = data
	if err == nil && (uerr != nil || terr != nil) {
		form, err = "page", server.ErrUnavailable
	}
	if err != nil {
		h.fail(c, "admin", p, form, err)
		return
	}
	h.render(c, status, "admin", p)
}

func isAdmin(c *gin.Context) bool {
	u, _ := c.Get(ctxUser)
	user, _ := u.(*server.User)
	return user != nil && user.Role == server.RoleAdmin
}

func (h *handler) createUser(c *gin.Context) {
	fp := &formParser{c: c}
	in := server.UserInput{
		Username: fp.str("username"), Password: c.PostForm("password"), Role: server.Role(fp.str("role")),
		Apps: fp.list("apps"), Reason: fp.str("reason"),
	}
	u, err := h.svc.CreateUser(c.Request.Context(), actor(c), in)
	if err != nil {
		h.admin(c, 0, "newuser", err, nil)
		return
	}
	redirect(c, Prefix+"/admin", "Created user "+u.Username+" ("+string(u.Role)+").")
}

func (h *handler) updateUser(c *gin.Context) {
	fp := &formParser{c: c}
	name := c.Param("username")
	role := server.Role(fp.str("role"))
	apps := fp.list("apps")
	disabled := c.PostForm("disabled") == "on"
	pt := server.UserPatch{Role: &role, Apps: &apps, Disabled: &disabled, Reason: fp.str("reason")}
	if pw := c.PostForm("password"); pw != "" {
		pt.Password = &pw
	}
	if _, err := h.svc.UpdateUser(c.Request.Context(), actor(c), name, pt); err != nil {
		h.admin(c, 0, "user:"+name, err, nil)
		return
	}
	redirect(c, Prefix+"/admin", "Saved user "+name+".")
}

func (h *handler) createToken(c *gin.Context) {
	fp := &formParser{c: c}
	in := server.TokenInput{Name: fp.str("name"), Role: server.Role(fp.str("role")), Apps: fp.list("apps"), Reason: fp.str("reason")}
	secret, t, err := h.svc.CreateToken(c.Request.Context(), actor(c), in)
	if err != nil {
		h.admin(c, 0, "newtoken", err, nil)
		return
	}
	// Shown once, on this response only: never in a redirect or a cookie.
	h.admin(c, http.StatusCreated, "", nil, map[string]any{"Secret": secret, "SecretName": t.Name})
}

func (h *handler) revokeToken(c *gin.Context) {
	fp := &formParser{c: c}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		h.admin(c, 0, "token:"+c.Param("id"), &server.ValidationError{Fields: []*server.FieldError{{Field: "id", Msg: "must be an integer"}}}, nil)
		return
	}
	if err := h.svc.RevokeToken(c.Request.Context(), actor(c), id, server.Change{Reason: fp.str("reason")}); err != nil {
		h.admin(c, 0, "token:"+c.Param("id"), err, nil)
		return
	}
	redirect(c, Prefix+"/admin", "Revoked token #"+c.Param("id")+".")
}

// accountPage lets anyone signed in change their own password.
func (h *handler) accountPage(c *gin.Context) {
	h.render(c, http.StatusOK, "account", &page{Title: "Your account"})
}

func (h *handler) changePassword(c *gin.Context) {
	p := &page{Title: "Your account"}
	if c.PostForm("password") != c.PostForm("confirm") {
		h.fail(c, "account", p, "password", &server.ValidationError{Fields: []*server.FieldError{{Field: "confirm", Msg: "does not match the new password"}}})
		return
	}
	u := c.MustGet(ctxUser).(*server.User)
	if err := h.svc.ChangeOwnPassword(c.Request.Context(), actor(c), c.PostForm("current"), c.PostForm("password")); err != nil {
		p.Values = url.Values{} // never echo passwords
		h.fail(c, "account", p, "password", err)
		return
	}
	if err := h.sessions.start(c, u); err != nil {
		redirect(c, Prefix+"/login", "")
		return
	}
	redirect(c, Prefix+"/account", "Password changed; your other sessions were signed out.")
}
