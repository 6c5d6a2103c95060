package webui_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/webui"
)

// ssoRules map the identity provider's groups: sre → admin,
// checkout-oncall → operator of checkout, everyone → viewer.
const ssoRules = `[
  {"group": "sre", "role": "admin"},
  {"group": "checkout-oncall", "role": "operator", "apps": ["checkout"]},
  {"group": "everyone", "role": "viewer"}
]`

// startIdP runs mockoidc, an OpenID Connect identity provider, in the
// test process on a free loopback port, with middleware in front of its
// endpoints.
func startIdP(t testing.TB, middleware ...func(http.Handler) http.Handler) *mockoidc.MockOIDC {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, mw := range middleware {
		if err := m.AddMiddleware(mw); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

// startSSOConsole runs a console whose web UI signs in through m with
// ssoRules; the client secret comes from a file.
func startSSOConsole(t testing.TB, m *mockoidc.MockOIDC, mod ...func(*console.Config)) *console.Console {
	t.Helper()
	dir := t.TempDir()
	rules, secret := filepath.Join(dir, "rules.json"), filepath.Join(dir, "client-secret")
	if err := os.WriteFile(rules, []byte(ssoRules), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte(m.ClientSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return startConsoleWith(t, webui.Options{Clock: fastClock{}}, append([]func(*console.Config){func(c *console.Config) {
		c.OIDC.Issuer, c.OIDC.ClientID, c.OIDC.ClientSecretFile, c.OIDC.RulesFile = m.Issuer(), m.ClientID, secret, rules
		c.OIDC.Name = "Acme ID"
	}}, mod...)...)
}

// person is an identity-provider user in groups.
func person(sub, name string, groups ...string) *mockoidc.MockUser {
	return &mockoidc.MockUser{Subject: sub, PreferredUsername: name, Email: name + "@example.com", EmailVerified: true, Groups: groups}
}

// ssoSignIn walks the sign-in as a browser without JavaScript: from
// "Sign in with …" to the identity provider and back to the callback. It
// returns the callback's status, Location and body.
func (cl *client) ssoSignIn(m *mockoidc.MockOIDC, who mockoidc.User) (int, string, string) {
	cl.t.Helper()
	m.QueueUser(who)
	status, loc, _ := cl.getFull("/ui/login/oidc?next=/ui/switches")
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, m.AuthorizationEndpoint()) {
		cl.t.Fatalf("sign in with SSO: %d to %q, want a redirect to the identity provider", status, loc)
	}
	res, err := cl.http.Get(loc)
	if err != nil {
		cl.t.Fatal(err)
	}
	res.Body.Close()
	back, err := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusFound || err != nil || back.Path != "/ui/login/oidc/callback" {
		cl.t.Fatalf("identity provider answered %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	return cl.getFull(back.RequestURI())
}

// getFull returns status, Location and body.
func (cl *client) getFull(path string) (int, string, string) {
	cl.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, cl.base+path, nil)
	req.Header.Set("Accept", browserAccept)
	res, err := cl.http.Do(req)
	if err != nil {
		cl.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Location"), string(b)
}

func userCount(t testing.TB, c *console.Console) int64 {
	t.Helper()
	n, err := c.Service.CountUsers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSSOSignIn: the authorisation code flow with PKCE against a real
// identity provider: the groups give the role, a person in no mapped
// group is refused and nothing is created, a changed group changes the
// role at the next sign-in (ending the old sessions), groups the ID token
// lacks are read from UserInfo, an unverified email
// is not kept, and a disabled user is refused.
func TestSSOSignIn(t *testing.T) {
	m := startIdP(t)
	c := startSSOConsole(t, m)
	ctx := context.Background()

	olga := newClient(t, c)
	status, loc, body := olga.ssoSignIn(m, person("sub-olga", "olga", "everyone", "checkout-oncall"))
	if status != http.StatusSeeOther || loc != "/ui/switches" {
		t.Fatalf("sign-in: %d %q\n%s", status, loc, body)
	}
	u, err := c.Service.UserByName(ctx, "olga")
	if err != nil || u.Role != server.RoleOperator || u.Apps != "checkout" || u.Source != server.UserSSO || u.Email != "olga@example.com" {
		t.Fatalf("user after the first sign-in: %+v %v", u, err)
	}
	if st, page := olga.get("/ui/"); st != http.StatusOK || !strings.Contains(page, `role-operator`) {
		t.Fatalf("overview as olga: %d", st)
	}
	events, _, err := c.Service.ListAudit(ctx, audit.Filter{Target: "user/olga"})
	if err != nil || len(events) != 1 || events[0].Action != audit.UserCreate || events[0].Actor != "sso" || !strings.Contains(events[0].Reason, "checkout-oncall → operator") {
		t.Fatalf("audit of the first sign-in: %+v %v", events, err)
	}

	t.Run("no mapped group is refused and nothing is created", func(t *testing.T) {
		before := userCount(t, c)
		cl := newClient(t, c)
		status, _, body := cl.ssoSignIn(m, person("sub-dan", "dan", "design", "marketing"))
		if status != http.StatusForbidden || !strings.Contains(body, "no rule of this console maps your groups (design, marketing)") {
			t.Fatalf("unmapped person: %d\n%s", status, body)
		}
		if n := userCount(t, c); n != before {
			t.Fatalf("users: %d, want %d", n, before)
		}
		if st, _ := cl.get("/ui/"); st != http.StatusSeeOther {
			t.Fatalf("refused person reached the overview: %d", st)
		}
	})

	t.Run("groups are read at every sign-in", func(t *testing.T) {
		again := newClient(t, c)
		if status, _, body := again.ssoSignIn(m, person("sub-olga", "olga", "sre")); status != http.StatusSeeOther {
			t.Fatalf("second sign-in: %d\n%s", status, body)
		}
		u, err := c.Service.UserByName(ctx, "olga")
		if err != nil || u.Role != server.RoleAdmin || u.Apps != "" {
			t.Fatalf("after joining sre: %+v %v", u, err)
		}
		// The role changed: the operator session ended with it.
		if st, _ := olga.get("/ui/"); st != http.StatusSeeOther {
			t.Fatalf("the old operator session still works: %d", st)
		}
		if st, page := again.get("/ui/"); st != http.StatusOK || !strings.Contains(page, `role-admin`) {
			t.Fatalf("overview as admin olga: %d", st)
		}
		// Out of every mapped group: refused, and her sessions end.
		if status, _, _ := newClient(t, c).ssoSignIn(m, person("sub-olga", "olga", "design")); status != http.StatusForbidden {
			t.Fatalf("olga in no mapped group: %d", status)
		}
		if st, _ := again.get("/ui/"); st != http.StatusSeeOther {
			t.Fatalf("olga's session outlived her groups: %d", st)
		}
	})

	t.Run("groups missing from the ID token are read from UserInfo", func(t *testing.T) {
		if status, _, body := newClient(t, c).ssoSignIn(m, groupsInUserInfo{person("sub-uma", "uma", "checkout-oncall")}); status != http.StatusSeeOther {
			t.Fatalf("sign-in: %d\n%s", status, body)
		}
		u, err := c.Service.UserByName(ctx, "uma")
		if err != nil || u.Role != server.RoleOperator || u.Apps != "checkout" {
			t.Fatalf("uma: %+v %v", u, err)
		}
	})

	t.Run("an unverified email is not kept", func(t *testing.T) {
		p := person("sub-eve", "eve", "everyone")
		p.EmailVerified = false
		if status, _, body := newClient(t, c).ssoSignIn(m, p); status != http.StatusSeeOther {
			t.Fatalf("sign-in: %d\n%s", status, body)
		}
		u, err := c.Service.UserByName(ctx, "eve")
		if err != nil || u.Email != "" || u.Role != server.RoleViewer {
			t.Fatalf("eve: %+v %v", u, err)
		}
	})

	t.Run("a local account's name is never taken over", func(t *testing.T) {
		mustCreateUser(t, c, "mallory", server.RoleAdmin)
		if status, _, body := newClient(t, c).ssoSignIn(m, person("sub-mallory", "mallory", "everyone")); status != http.StatusSeeOther {
			t.Fatalf("sign-in: %d\n%s", status, body)
		}
		local, err := c.Service.UserByName(ctx, "mallory")
		if err != nil || local.Source != server.UserLocal || local.Role != server.RoleAdmin {
			t.Fatalf("the local mallory changed: %+v %v", local, err)
		}
		users, _, _ := c.Service.ListUsers(ctx, server.Page{})
		var sso *server.User
		for i := range users {
			if users[i].Source == server.UserSSO && strings.HasPrefix(users[i].Username, "mallory-") {
				sso = &users[i]
			}
		}
		if sso == nil || sso.Role != server.RoleViewer {
			t.Fatalf("no viewer mallory-… from single sign-on: %+v", users)
		}
		// Nor can anyone sign in as the SSO user with a password.
		cl := newClient(t, c)
		tok := cl.csrf("/ui/login")
		if st, _, _ := cl.post("/ui/login", url.Values{"_csrf": {tok}, "username": {sso.Username}, "password": {"whatever-password"}, "reason": {"test"}}); st != http.StatusUnauthorized {
			t.Fatalf("password sign-in as an SSO user: %d", st)
		}
	})

	t.Run("a disabled user is refused", func(t *testing.T) {
		disabled := true
		if _, err := c.Service.UpdateUser(ctx, admin, "eve", server.UserPatch{Disabled: &disabled, Reason: "left the company"}); err != nil {
			t.Fatal(err)
		}
		status, _, body := newClient(t, c).ssoSignIn(m, person("sub-eve", "eve", "everyone"))
		if status != http.StatusForbidden || !strings.Contains(body, "disabled") {
			t.Fatalf("disabled eve: %d\n%s", status, body)
		}
	})
}

// groupsInUserInfo is an identity-provider user whose groups are in the
// UserInfo answer only, not in the ID token.
type groupsInUserInfo struct{ *mockoidc.MockUser }

func (u groupsInUserInfo) Claims(scope []string, c *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	token := *u.MockUser
	token.Groups = nil
	return token.Claims(scope, c)
}

// tampered is an identity-provider user whose ID token claims are
// changed before the provider signs them.
type tampered struct {
	*mockoidc.MockUser
	change func(*mockoidc.IDTokenClaims)
}

func (u tampered) Claims(scope []string, c *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	u.change(c)
	return u.MockUser.Claims(scope, c)
}

// TestSSORefusesBadTokens: an ID token with the wrong audience, expired,
// with another nonce, or signed by a key the provider does not publish,
// and a callback whose state is not this browser's, sign nobody in and
// create nothing.
func TestSSORefusesBadTokens(t *testing.T) {
	// A second key that the provider does not publish: tokens it signs
	// carry an unknown key id.
	rogue, err := mockoidc.RandomKeypair(2048)
	if err != nil {
		t.Fatal(err)
	}
	var resign atomic.Bool
	m := startIdP(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !resign.Load() || r.URL.Path != mockoidc.TokenEndpoint {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			var tr map[string]any
			_ = json.Unmarshal(rec.Body.Bytes(), &tr)
			if _, ok := tr["id_token"].(string); !ok {
				// An error answer (oauth2 first tries client_secret_basic,
				// which mockoidc does not take) passes unchanged.
				w.WriteHeader(rec.Code)
				_, _ = w.Write(rec.Body.Bytes())
				return
			}
			claims := jwt.MapClaims{}
			if _, _, err := jwt.NewParser().ParseUnverified(tr["id_token"].(string), claims); err != nil {
				t.Error(err)
			}
			tr["id_token"], _ = rogue.SignJWT(claims)
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(tr)
		})
	})
	c := startSSOConsole(t, m)
	before := userCount(t, c) + 1 // the control signs in

	cases := []struct {
		name   string
		change func(*mockoidc.IDTokenClaims)
		rogue  bool
	}{
		// The control: the same path with nothing changed signs in.
		{"untouched", nil, false},
		{"wrong audience", func(c *mockoidc.IDTokenClaims) { c.Audience = jwt.ClaimStrings{"another-client"} }, false},
		{"expired", func(c *mockoidc.IDTokenClaims) {
			c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Hour))
			c.IssuedAt = jwt.NewNumericDate(time.Now().Add(-2 * time.Hour))
			c.NotBefore = c.IssuedAt
		}, false},
		{"nonce mismatch", func(c *mockoidc.IDTokenClaims) { c.Nonce = "a-nonce-of-another-sign-in" }, false},
		{"unknown key id", func(*mockoidc.IDTokenClaims) {}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resign.Store(tc.rogue)
			defer resign.Store(false)
			cl := newClient(t, c)
			if tc.change == nil {
				if status, _, body := cl.ssoSignIn(m, person("sub-control", "control", "everyone")); status != http.StatusSeeOther {
					t.Fatalf("control: %d\n%s", status, body)
				}
				return
			}
			status, _, body := cl.ssoSignIn(m, tampered{person("sub-"+tc.name, "bad", "sre"), tc.change})
			if status != http.StatusUnauthorized || !strings.Contains(body, "could not be verified") {
				t.Fatalf("%s: %d\n%s", tc.name, status, body)
			}
			if st, _ := cl.get("/ui/"); st != http.StatusSeeOther {
				t.Fatalf("%s: signed in anyway (%d)", tc.name, st)
			}
		})
	}

	t.Run("state of another browser", func(t *testing.T) {
		cl := newClient(t, c)
		m.QueueUser(person("sub-csrf", "csrf", "sre"))
		_, loc, _ := cl.getFull("/ui/login/oidc")
		res, err := cl.http.Get(loc)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		back, _ := url.Parse(res.Header.Get("Location"))
		q := back.Query()
		q.Set("state", "forged-state")
		back.RawQuery = q.Encode()
		if status, _, body := cl.getFull(back.RequestURI()); status != http.StatusUnauthorized {
			t.Fatalf("forged state: %d\n%s", status, body)
		}
		// Without the flow cookie (another browser) the callback is refused too.
		if status, _, _ := newClient(t, c).getFull(back.RequestURI()); status != http.StatusBadRequest {
			t.Fatalf("callback without the flow cookie: %d", status)
		}
	})
	if n := userCount(t, c); n != before {
		t.Fatalf("users: %d, want %d (a refused sign-in created one)", n, before)
	}
}

// TestBreakGlassLocalSignIn: with single sign-on on and local accounts
// limited to break-glass, a password sign-in needs a reason, is for
// admins only and only while the identity provider is unreachable; when it
// happens it is audited and notified.
func TestBreakGlassLocalSignIn(t *testing.T) {
	m := startIdP(t)
	c := startSSOConsole(t, m, func(cfg *console.Config) { cfg.LocalSignIn = webui.LocalBreakGlass })
	ctx := context.Background()
	rootPW := mustCreateUser(t, c, "root", server.RoleAdmin)
	opPW := mustCreateUser(t, c, "ops", server.RoleOperator, "checkout")

	try := func(user, pw, reason string) (int, string) {
		cl := newClient(t, c)
		tok := cl.csrf("/ui/login")
		st, _, body := cl.post("/ui/login", url.Values{"_csrf": {tok}, "username": {user}, "password": {pw}, "reason": {reason}, "next": {"/ui/"}})
		return st, body
	}
	if st, body := try("root", rootPW, ""); st != http.StatusBadRequest || !strings.Contains(body, "No reason given") {
		t.Fatalf("no reason: %d", st)
	}
	if st, body := try("ops", opPW, "INC-9"); st != http.StatusForbidden || !strings.Contains(body, "only administrators") {
		t.Fatalf("operator: %d", st)
	}
	if st, body := try("root", rootPW, "INC-9"); st != http.StatusForbidden || !strings.Contains(body, "Acme ID answers") {
		t.Fatalf("admin while the identity provider answers: %d", st)
	}
	if events, _, _ := c.Service.ListAudit(ctx, audit.Filter{Action: audit.UserSignIn}); len(events) != 0 {
		t.Fatalf("refused sign-ins were audited: %+v", events)
	}

	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if st, body := try("root", rootPW, "INC-9: Acme ID is down"); st != http.StatusSeeOther {
		t.Fatalf("break-glass while the identity provider is down: %d\n%s", st, body)
	}
	events, _, err := c.Service.ListAudit(ctx, audit.Filter{Action: audit.UserSignIn})
	if err != nil || len(events) != 1 || events[0].Actor != "root" || events[0].Reason != "INC-9: Acme ID is down" {
		t.Fatalf("audit: %+v %v", events, err)
	}
	var n int64
	if err := c.DB.Table("notifications").Where("kind = ? AND target = ?", "signin.local", "user/root").Count(&n).Error; err != nil || n != 1 {
		t.Fatalf("notifications of the break-glass sign-in: %d %v", n, err)
	}
}

// TestBrowserSSO signs in through the identity provider in real headless
// Chromium: "Sign in with Acme ID" lands on the Overview with the role the
// group maps to; a person in no mapped group sees the refusal page; after
// a change of groups the next sign-in has the new role.
func TestBrowserSSO(t *testing.T) {
	root := browser(t)
	m := startIdP(t)
	c := startSSOConsole(t, m)
	signIn := func(who *mockoidc.MockUser, landOn string) *session {
		s := newSession(t, root, c)
		m.QueueUser(who)
		s.do("sign in with SSO as "+who.PreferredUsername,
			chromedp.Navigate(s.base+"/ui/login"),
			s.click("#sso"),
			chromedp.WaitVisible(chromedp.CSS(landOn)),
		)
		return s
	}
	role := func(s *session) string {
		return s.eval(`document.querySelector(".user .role").textContent`)
	}

	ana := signIn(person("sub-ana", "ana", "everyone", "checkout-oncall"), "#live-status")
	if h1 := ana.eval(`document.querySelector("h1").textContent`); h1 != "What is degraded now" || role(ana) != "operator" {
		t.Fatalf("after sign-in: %q as %q", h1, role(ana))
	}
	if ana.clicks != 1 {
		t.Fatalf("sign-in took %d clicks", ana.clicks)
	}

	zed := signIn(person("sub-zed", "zed", "design"), "#refusal")
	if msg := zed.eval(`document.querySelector("#refusal").textContent`); !strings.Contains(msg, "no rule of this console maps your groups (design)") {
		t.Fatalf("refusal: %q", msg)
	}
	if _, err := c.Service.UserByName(context.Background(), "zed"); !errors.Is(err, server.ErrNotFound) {
		t.Fatalf("the refused person was created: %v", err)
	}

	again := signIn(person("sub-ana", "ana", "everyone", "sre"), "#live-status")
	if role(again) != "admin" {
		t.Fatalf("after joining sre: %q", role(again))
	}
}
