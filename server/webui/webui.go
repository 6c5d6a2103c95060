package webui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/fleet"
	"github.com/switchyard-io/switchyard/web"
)

// Prefix is where the web UI is mounted.
const Prefix = "/ui"

// Options tune the web UI.
type Options struct {
	// SessionTTL is the absolute lifetime of a session (default 12h).
	SessionTTL time.Duration
	// IdleTimeout ends a session unused for this long (default 1h).
	IdleTimeout time.Duration
	// Clock drives the sign-in throttle (default the system clock).
	Clock limit.Clock
}

func (o *Options) defaults() {
	if o.SessionTTL <= 0 {
		o.SessionTTL = 12 * time.Hour
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = time.Hour
	}
}

// Deps is what the web UI needs from the console that serves it.
type Deps struct {
	Service   *server.Service
	Fleet     *fleet.Model
	Etcd      *clientv3.Client
	Namespace string
	Logger    *slog.Logger
	// Domains are the job domains' pages (domains.go).
	Domains []Pages
	// SignIn is single sign-on and the local accounts' policy (sso.go).
	SignIn SignIn
}

// UI is the web console.
type UI struct{ h *handler }

// New returns the web UI on d; Routes mounts it, Close stops it. It ends a
// user's sessions (web_sessions, which it owns) inside the transaction that
// changes the user's password, role or disabled flag.
func New(d Deps, o Options) *UI {
	o.defaults()
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	db := d.Service.DB()
	h := &handler{
		svc: d.Service, fleet: d.Fleet, pages: parseTemplates(), log: d.Logger,
		sessions: &sessions{db: db, svc: d.Service, ttl: o.SessionTTL, idle: o.IdleTimeout},
		hub:      newHub(d.Etcd, db, d.Namespace),
		signIn:   newSignInThrottle(o.Clock),
		onSwitch: map[string]SwitchSection{}, onOverview: map[string]OverviewSection{},
		domains: d.Domains, signInCfg: d.SignIn,
	}
	d.Service.OnCredentialsChange(endSessions)
	h.hub.start()
	return &UI{h: h}
}

// Routes mounts the pages on r.
func (u *UI) Routes(r *gin.Engine) { u.h.routes(r) }

// Close ends the open event streams, which would hold up a graceful
// shutdown, and joins the live hub's goroutines. It may be called more
// than once.
func (u *UI) Close() { u.h.hub.stop() }

// handler serves every page.
type handler struct {
	svc   *server.Service
	fleet *fleet.Model
	// onSwitch and onOverview are the job domains' sections (sections.go).
	onSwitch   map[string]SwitchSection
	onOverview map[string]OverviewSection
	domains    []Pages
	signInCfg  SignIn
	verify     verifyCache
	pages      map[string]*template.Template
	sessions   *sessions
	hub        *hub
	signIn     *signInThrottle
	log        *slog.Logger

	// findingCounts counts the open findings for the navigation bar (nil:
	// no count).
	findingCounts func(*gin.Context) *FindingCounts
	// openRequests counts the change requests waiting, for the
	// navigation bar's badge (requests.go).
	openRequests func(*gin.Context) int
}

func (h *handler) routes(r *gin.Engine) {
	static, _ := fs.Sub(web.FS, "static")
	r.GET("/", func(c *gin.Context) { c.Redirect(http.StatusSeeOther, Prefix+"/") })
	ui := r.Group(Prefix, securityHeaders)
	ui.StaticFS("/static", http.FS(static))
	ui.GET("/login", h.loginPage)
	ui.POST("/login", h.login)
	if h.signInCfg.SSO != nil {
		ui.GET("/login/oidc", h.ssoStart)
		ui.GET("/login/oidc/callback", h.ssoCallback)
	}

	r.NoRoute(h.notFound)

	in := ui.Group("", h.requireSession, h.checkCSRF)
	in.POST("/logout", h.logout)
	in.GET("/", h.overview)
	in.GET("/events", h.events)
	in.GET("/switches", h.switchList)
	in.GET("/switches/new", h.newSwitchPage)
	in.POST("/switches", h.createSwitch)
	in.POST("/switches/on", h.quickOn)
	sw := in.Group("/apps/:app/switches/:name")
	sw.GET("", h.switchDetail)
	sw.POST("/on", h.turnOn)
	sw.POST("/off", h.turnOff)
	sw.POST("/edit", h.editSwitch)
	sw.POST("/rollback", h.rollback)
	sw.POST("/delete", h.deleteSwitch)
	in.GET("/apps/:app/instances", h.instances)
	in.GET("/apps/:app/instances/:id", h.instance)
	in.GET("/instances", h.instances)
	in.GET("/limits", h.limitList)
	in.GET("/limits/edit", h.limitPage)
	in.POST("/limits/save", h.saveLimit)
	in.POST("/limits/state", h.limitState)
	in.POST("/limits/delete", h.deleteLimit)
	in.GET("/audit", h.auditPage)
	in.GET("/audit/export", h.auditExport)
	in.GET("/account", h.accountPage)
	in.POST("/account/password", h.changePassword)
	in.GET("/admin", h.adminPage)
	in.POST("/admin/users", h.createUser)
	in.POST("/admin/users/:username", h.updateUser)
	in.POST("/admin/tokens", h.createToken)
	in.POST("/admin/tokens/:id/revoke", h.revokeToken)
	for _, d := range h.domains {
		if d.mount != nil {
			d.mount(h, in)
		}
	}
	h.registerRequests(in)
}

// securityHeaders keeps pages out of frames and scripts to our own origin.
func securityHeaders(c *gin.Context) {
	setSecurityHeaders(c.Writer.Header())
	c.Next()
}

func setSecurityHeaders(hd http.Header) {
	hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("X-Frame-Options", "DENY")
}

// page is what every template receives.
type page struct {
	Title  string
	Nav    string
	User   *server.User
	CSRF   string
	Flash  string
	Path   string
	Apps   []string
	Data   any
	Form   string            // the form that failed, if any
	Errors map[string]string // field errors of that form
	Error  string            // the form's error that names no field
	Values url.Values        // what was submitted, to refill the form
	// Fleet marks a page that shows fleet data: it follows the stream's
	// "fleet" events as well as its "change" events.
	Fleet bool
	// Findings are the open findings, counted for the navigation bar.
	Findings *FindingCounts
	// OpenRequests counts the change requests waiting (the badge).
	OpenRequests int
}

// Err returns the error of field in form, if that form failed. A field
// "percent" also matches "rollout.percent".
func (p *page) Err(form, field string) string {
	if p.Form != form {
		return ""
	}
	if m, ok := p.Errors[field]; ok {
		return m
	}
	for k, m := range p.Errors {
		if strings.HasSuffix(k, "."+field) || strings.HasPrefix(k, field+"[") || strings.Contains(k, "."+field+"[") {
			return m
		}
	}
	return ""
}

// FormErr returns the error of form that names no field.
func (p *page) FormErr(form string) string {
	if p.Form != form {
		return ""
	}
	return p.Error
}

// Val returns the submitted value of field when form failed, else def.
func (p *page) Val(form, field string, def any) string {
	if p.Form == form && p.Values != nil {
		if _, ok := p.Values[field]; ok {
			return p.Values.Get(field)
		}
	}
	if def == nil {
		return ""
	}
	return fmt.Sprint(def)
}

// CanWrite reports whether the signed-in user may change app.
func (p *page) CanWrite(app string) bool { return p.User != nil && p.User.Actor().CanWrite(app) }

// CanWriteAny reports whether the signed-in user may change some app, and
// so is offered create forms.
func (p *page) CanWriteAny() bool { return writesSomeApp(p.User) }

// IsAdmin reports whether the signed-in user is an admin.
func (p *page) IsAdmin() bool { return p.User != nil && p.User.Role == server.RoleAdmin }

var funcs = template.FuncMap{
	"ago": func(t any) string {
		tm, ok := timeOf(t)
		if !ok {
			return "—"
		}
		return human(time.Since(tm)) + " ago"
	},
	"until": func(t any) string {
		tm, ok := timeOf(t)
		if !ok {
			return "never"
		}
		d := time.Until(tm)
		if d < 0 {
			return "expired " + human(-d) + " ago"
		}
		return "in " + human(d)
	},
	"stamp": func(t any) string {
		tm, ok := timeOf(t)
		if !ok {
			return ""
		}
		return tm.UTC().Format(stampLayout)
	},
	"pct":          percent,
	"rate":         rate,
	"defaultMaxOn": func() string { return server.ShortDuration(server.DefaultMaxOn) },
	"levelName":    func(l wire.Level) string { return l.Label() },
	"dangerous":    server.NeedsConfirmation,
	"join":         strings.Join,
	"levels":       func() []wire.Level { return []wire.Level{wire.L1, wire.L2, wire.L3, wire.L4, wire.L5} },
	"kinds":        func() []string { return wire.LimitKinds },
	"query":        func(kv ...string) template.URL { return template.URL(queryString(kv...)) },
	"args": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[fmt.Sprint(kv[i])] = kv[i+1]
		}
		return m
	},
	"actions":   func() []audit.Action { return audit.Actions },
	"targetURL": targetURL,
	"count":     count,
	"linkPath":  linkPath,
	"isTime":    isTime,
	"lastRead":  lastRead,
	"lines":     func(keys []string) string { return strings.Join(keys, "\n") },
	"pathEsc": func(s string) string {
		return url.PathEscape(s)
	},
}

// targetURL is the page of an audit or finding target: a switch, a limit
// rule, an auto-trigger rule, a staged rollout ("rollout/<app>/<switch>#<id>"), a drill
// ("drill/<app>/<name>") or one of its runs ("…#<number>"); "" when the
// console has no page for it.
func targetURL(target string) string {
	kind, rest, _ := strings.Cut(target, "/")
	app, rest, ok := strings.Cut(rest, "/")
	if !ok || app == "" || rest == "" {
		return ""
	}
	name, num, numbered := strings.Cut(rest, "#")
	switch kind {
	case "switch":
		return switchURL(app, rest)
	case "limit":
		return limitURL(app, rest)
	case "trigger":
		return triggerURL(app, rest)
	case "rollout":
		if id, err := strconv.ParseInt(num, 10, 64); numbered && err == nil {
			return rolloutURL(app, id)
		}
	case "drill":
		if n, err := strconv.ParseInt(num, 10, 64); numbered && err == nil {
			return runURL(app, name, n)
		}
		return drillURL(app, name)
	}
	return ""
}

// linkPath shows text such as a finding's detail ("report: /ui/apps/…")
// with a console path at its end as a link to it.
func linkPath(text string) template.HTML {
	i := strings.LastIndex(text, " "+Prefix+"/")
	if i < 0 || strings.ContainsAny(text[i+1:], " \"'<>") {
		return template.HTML(template.HTMLEscapeString(text))
	}
	p := template.HTMLEscapeString(text[i+1:])
	return template.HTML(template.HTMLEscapeString(text[:i+1]) + `<a href="` + p + `">` + p + `</a>`)
}

// lastRead says when a switch was last read, as precisely as SDKs report
// it: a read moves the reported time only once it advanced by
// wire.ReadGranularity, so a recent one is "within the last 5 min".
func lastRead(t any) string {
	tm, ok := timeOf(t)
	switch {
	case !ok:
		return "—"
	case time.Since(tm) < wire.ReadGranularity:
		return fmt.Sprintf("within the last %d min", int(wire.ReadGranularity.Minutes()))
	}
	return human(time.Since(tm)) + " ago"
}

// count writes "1 live instance", "2 live instances", "3 switches"; n is
// any integer a page holds.
func count(n any, what string) string {
	s := fmt.Sprint(n)
	if s == "1" {
		return "1 " + what
	}
	if strings.HasSuffix(what, "ch") || strings.HasSuffix(what, "sh") || strings.HasSuffix(what, "s") || strings.HasSuffix(what, "x") {
		return s + " " + what + "es"
	}
	return s + " " + what + "s"
}

// stampLayout is how pages show a point in time.
const stampLayout = "2006-01-02 15:04:05 UTC"

// percent formats a rollout percentage: "25 %", "0.5 %".
func percent(f float64) string {
	if f == math.Trunc(f) {
		return fmt.Sprintf("%.0f %%", f)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", f), "0"), ".") + " %"
}

// prettyJSON indents a JSON document for the fallback editor.
func prettyJSON(s string) string {
	var b bytes.Buffer
	if json.Indent(&b, []byte(s), "", "  ") != nil {
		return s
	}
	return b.String()
}

func queryString(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	return q.Encode()
}

func timeOf(t any) (time.Time, bool) {
	switch v := t.(type) {
	case time.Time:
		return v, !v.IsZero()
	case *time.Time:
		if v == nil || v.IsZero() {
			return time.Time{}, false
		}
		return *v, true
	}
	return time.Time{}, false
}

// human formats a duration coarsely: "45s", "12m", "3h 5m", "4d 2h".
func human(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

// parseTemplates builds one template set per page: layout.html and
// partials.html plus the page's own file.
func parseTemplates() map[string]*template.Template {
	base := template.Must(template.New("").Funcs(funcs).ParseFS(web.FS, "templates/layout.html", "templates/partials.html", "templates/sections/*.html"))
	names, err := fs.Glob(web.FS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		name := path.Base(n)
		if name == "layout.html" || name == "partials.html" {
			continue
		}
		out[strings.TrimSuffix(name, ".html")] = template.Must(template.Must(base.Clone()).ParseFS(web.FS, n))
	}
	return out
}

// render writes a page with status.
func (h *handler) render(c *gin.Context, status int, name string, p *page) {
	t, ok := h.pages[name]
	if !ok {
		panic("webui: no template " + name)
	}
	if u, ok := c.Get(ctxUser); ok {
		p.User = u.(*server.User)
	}
	if s, ok := c.Get(ctxSession); ok {
		p.CSRF = s.(*session).CSRFToken
	}
	p.Path = c.Request.URL.Path
	if p.Flash == "" && c.GetHeader("X-Live") == "" {
		p.Flash = takeFlash(c)
	}
	if p.Apps == nil && p.User != nil {
		p.Apps = h.apps(c)
	}
	if p.User != nil && h.findingCounts != nil {
		p.Findings = h.findingCounts(c)
	}
	if p.User != nil && h.openRequests != nil {
		p.OpenRequests = h.openRequests(c)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		h.log.Error("webui: render", "page", name, "err", err)
		c.String(http.StatusInternalServerError, "internal error rendering the page")
		return
	}
	c.Header("Cache-Control", "no-store")
	c.Data(status, "text/html; charset=utf-8", buf.Bytes())
}

// apps lists every app that has a switch or a limit rule.
func (h *handler) apps(c *gin.Context) []string {
	set := map[string]bool{}
	if sws, err := h.svc.ListSwitches(c.Request.Context(), ""); err == nil {
		for _, s := range sws {
			set[s.App] = true
		}
	}
	if ls, err := h.svc.ListLimits(c.Request.Context(), ""); err == nil {
		for _, l := range ls {
			set[l.App] = true
		}
	}
	out := make([]string, 0, len(set))
	for a := range set {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// flash messages survive one redirect in a short-lived cookie.
const flashCookie = "sy_flash"

func setFlash(c *gin.Context, msg string) {
	http.SetCookie(c.Writer, &http.Cookie{
		Name: flashCookie, Value: url.QueryEscape(msg), Path: Prefix, MaxAge: 30,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: isTLS(c),
	})
}

func takeFlash(c *gin.Context) string {
	ck, err := c.Request.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: flashCookie, Path: Prefix, MaxAge: -1})
	msg, _ := url.QueryUnescape(ck.Value)
	return msg
}

// redirect answers a successful form post (post/redirect/get).
func redirect(c *gin.Context, to, flash string) {
	if flash != "" {
		setFlash(c, flash)
	}
	c.Redirect(http.StatusSeeOther, to)
}

// receiptNote says whether a change already reached etcd.
func receiptNote(rc server.Receipt) string {
	if rc.Published {
		return fmt.Sprintf(" Published to etcd at revision %d.", rc.Revision)
	}
	return " Saved; not yet published to etcd (the outbox will retry)."
}

func isTLS(c *gin.Context) bool {
	if c.Request.TLS != nil {
		return true
	}
	// Behind a TLS-terminating proxy: only a trusted proxy (--trusted-
	// proxies) is believed, and gin believes its X-Forwarded-For only then,
	// so a client address that differs from the peer's marks one.
	return strings.EqualFold(c.GetHeader("X-Forwarded-Proto"), "https") && c.ClientIP() != c.RemoteIP()
}
