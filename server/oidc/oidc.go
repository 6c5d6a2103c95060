// Package oidc signs people in to the web console through an OpenID
// Connect identity provider: the authorisation code flow with PKCE, state
// and nonce. go-oidc verifies the ID token (signature, issuer, audience,
// expiry); this package checks the state and the nonce itself, reads the
// groups (from the ID token, else from UserInfo) and maps them to a role
// and app grants by rules (rules.go). It knows no HTTP framework and
// writes nothing: the web UI keeps the flow in a cookie and
// server.Service.SignInSSO records the user.
package oidc

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"strings"
	"sync"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/switchyard-io/switchyard/server"
)

// Config is the identity provider and how its answers map to people.
type Config struct {
	// Issuer is the identity provider's issuer URL; discovery starts at
	// Issuer + "/.well-known/openid-configuration".
	Issuer       string
	ClientID     string
	ClientSecret string
	// Scopes asked for (default openid, profile, email, groups).
	Scopes []string
	// GroupsClaim is the claim that holds the groups (default "groups");
	// when the ID token lacks it, the UserInfo answer is asked.
	GroupsClaim string
	Rules       []Rule
	// DefaultRole is given when no rule matches; "" (the default) refuses
	// such a person: strict.
	DefaultRole server.Role
	// Name is what the sign-in button says: "Sign in with <Name>"
	// (default "SSO").
	Name string
	// HTTPClient talks to the identity provider (default: 10 s timeout).
	HTTPClient *http.Client
	// Now is the clock ID tokens' expiry is checked against (tests).
	Now func() time.Time
}

// Provider is a configured identity provider. Discovery happens at the
// first use and is retried until it succeeds, so a console starts (and
// its break-glass local accounts work) while the identity provider is
// unreachable.
type Provider struct {
	cfg Config
	mu  sync.Mutex
	p   *gooidc.Provider
}

// New returns the provider of cfg.
func New(cfg Config) (*Provider, error) {
	var errs []string
	if cfg.Issuer == "" {
		errs = append(errs, "issuer is required")
	}
	if cfg.ClientID == "" {
		errs = append(errs, "client id is required")
	}
	if cfg.DefaultRole != "" && !cfg.DefaultRole.Valid() {
		errs = append(errs, `default role must be "viewer", "operator" or "admin"`)
	}
	if cfg.DefaultRole == server.RoleOperator {
		errs = append(errs, "default role operator would need app grants; use viewer or a rule")
	}
	if len(errs) > 0 {
		return nil, errors.New("oidc: " + strings.Join(errs, "; "))
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = []string{gooidc.ScopeOpenID, "profile", "email", "groups"}
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	if cfg.Name == "" {
		cfg.Name = "SSO"
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	return &Provider{cfg: cfg}, nil
}

// Name is what the sign-in button names.
func (p *Provider) Name() string { return p.cfg.Name }

func (p *Provider) ctx(ctx context.Context) context.Context {
	return gooidc.ClientContext(ctx, p.cfg.HTTPClient)
}

// discover returns the identity provider's metadata, fetched once.
func (p *Provider) discover(ctx context.Context) (*gooidc.Provider, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.p != nil {
		return p.p, nil
	}
	gp, err := gooidc.NewProvider(p.ctx(ctx), p.cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	p.p = gp
	return gp, nil
}

// ErrUnreachable: the identity provider did not answer its discovery.
var ErrUnreachable = errors.New("oidc: identity provider unreachable")

// Reachable asks the identity provider's discovery document now (at most
// 3 s): the break-glass policy lets local accounts in only while it does
// not answer.
func (p *Provider) Reachable(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(p.cfg.Issuer, "/")+"/.well-known/openid-configuration", nil)
	if err != nil {
		return false
	}
	res, err := p.cfg.HTTPClient.Do(req)
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}

func (p *Provider) oauth2(gp *gooidc.Provider, redirectURL string) *oauth2.Config {
	return &oauth2.Config{
		ClientID: p.cfg.ClientID, ClientSecret: p.cfg.ClientSecret, Endpoint: gp.Endpoint(),
		RedirectURL: redirectURL, Scopes: p.cfg.Scopes,
	}
}

// Flow is what the browser keeps between leaving for the identity
// provider and coming back: the state (against login CSRF), the nonce
// (binds the ID token to this flow), the PKCE verifier (binds the code to
// this browser) and where to go after signing in.
type Flow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"x"`
}

// NewFlow starts a flow that returns to next.
func NewFlow(next string) Flow {
	return Flow{State: random(), Nonce: random(), Verifier: oauth2.GenerateVerifier(), Next: next}
}

func random() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// AuthURL is where the browser goes to sign in: the identity provider's
// authorisation endpoint with the flow's state, nonce and PKCE challenge
// (S256).
func (p *Provider) AuthURL(ctx context.Context, f Flow, redirectURL string) (string, error) {
	gp, err := p.discover(ctx)
	if err != nil {
		return "", err
	}
	return p.oauth2(gp, redirectURL).AuthCodeURL(f.State, gooidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier)), nil
}

// Refusal is a sign-in the console refuses although the identity
// provider vouched for the person (no rule maps their groups); Msg is
// said to them. Issuer and Subject name the person, whose sessions end if
// they had a user here.
type Refusal struct{ Msg, Issuer, Subject string }

func (r *Refusal) Error() string { return "oidc: refused: " + r.Msg }

// Finish completes the flow f with the state and code the identity
// provider sent back: it checks the state, redeems the code with the PKCE
// verifier, verifies the ID token (go-oidc: signature by a key of the
// provider, issuer, audience = client id, expiry), checks its nonce, reads
// the claims and maps the groups. An error other than a Refusal means the
// answer cannot be trusted or the provider failed.
func (p *Provider) Finish(ctx context.Context, f Flow, state, code, redirectURL string) (server.Identity, error) {
	if f.State == "" || subtle.ConstantTimeCompare([]byte(state), []byte(f.State)) != 1 {
		return server.Identity{}, errors.New("oidc: the state does not match this browser's sign-in")
	}
	gp, err := p.discover(ctx)
	if err != nil {
		return server.Identity{}, err
	}
	ctx = p.ctx(ctx)
	tok, err := p.oauth2(gp, redirectURL).Exchange(ctx, code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		return server.Identity{}, fmt.Errorf("oidc: redeem the code: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return server.Identity{}, errors.New("oidc: the token answer has no id_token")
	}
	idt, err := gp.VerifierContext(ctx, &gooidc.Config{ClientID: p.cfg.ClientID, Now: p.cfg.Now}).Verify(ctx, raw)
	if err != nil {
		return server.Identity{}, fmt.Errorf("oidc: ID token: %w", err)
	}
	// go-oidc leaves the nonce to the caller.
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(f.Nonce)) != 1 {
		return server.Identity{}, errors.New("oidc: ID token: the nonce does not match this sign-in")
	}
	var claims map[string]json.RawMessage
	if err := idt.Claims(&claims); err != nil {
		return server.Identity{}, fmt.Errorf("oidc: ID token claims: %w", err)
	}
	groups, found, err := stringList(claims[p.cfg.GroupsClaim])
	if err != nil {
		return server.Identity{}, fmt.Errorf("oidc: claim %s: %w", p.cfg.GroupsClaim, err)
	}
	if !found && gp.UserInfoEndpoint() != "" {
		if groups, err = p.userInfoGroups(ctx, gp, tok, idt.Subject); err != nil {
			return server.Identity{}, err
		}
	}
	return p.identity(idt, claims, groups)
}

// userInfoGroups reads the groups claim from the UserInfo answer, which
// must be about the ID token's subject.
func (p *Provider) userInfoGroups(ctx context.Context, gp *gooidc.Provider, tok *oauth2.Token, sub string) ([]string, error) {
	ui, err := gp.UserInfo(ctx, oauth2.StaticTokenSource(tok))
	if err != nil {
		return nil, fmt.Errorf("oidc: userinfo: %w", err)
	}
	if ui.Subject != sub {
		return nil, errors.New("oidc: userinfo is about another subject than the ID token")
	}
	var claims map[string]json.RawMessage
	if err := ui.Claims(&claims); err != nil {
		return nil, fmt.Errorf("oidc: userinfo claims: %w", err)
	}
	groups, _, err := stringList(claims[p.cfg.GroupsClaim])
	if err != nil {
		return nil, fmt.Errorf("oidc: userinfo claim %s: %w", p.cfg.GroupsClaim, err)
	}
	return groups, nil
}

// identity maps the verified claims to a person, or a Refusal.
func (p *Provider) identity(idt *gooidc.IDToken, claims map[string]json.RawMessage, groups []string) (server.Identity, error) {
	var c struct {
		Email             string          `json:"email"`
		EmailVerified     json.RawMessage `json:"email_verified"`
		PreferredUsername string          `json:"preferred_username"`
	}
	b, _ := json.Marshal(claims)
	_ = json.Unmarshal(b, &c)
	email := ""
	// An unverified email names nobody: it is neither kept nor used for
	// the user name.
	if verified(c.EmailVerified) {
		if a, err := mail.ParseAddress(c.Email); err == nil && a.Address == c.Email {
			email = c.Email
		}
	}
	name := c.PreferredUsername
	if name == "" && email != "" {
		name, _, _ = strings.Cut(email, "@")
	}
	if name == "" {
		name = idt.Subject
	}
	g, ok := Map(p.cfg.Rules, groups, p.cfg.DefaultRole)
	if !ok {
		return server.Identity{}, &Refusal{Issuer: idt.Issuer, Subject: idt.Subject, Msg: fmt.Sprintf("%s signed you in, but no rule of this console maps your groups (%s) to a role. Ask an administrator to add a rule for one of your groups.", p.cfg.Name, groupList(groups))}
	}
	why := g.Why
	if len(why) > 900 {
		why = why[:900] + "…"
	}
	return server.Identity{
		Issuer: idt.Issuer, Subject: idt.Subject, Name: name, Email: email, Groups: groups,
		Role: g.Role, Apps: g.Apps, Why: why,
	}, nil
}

func groupList(groups []string) string {
	if len(groups) == 0 {
		return "none"
	}
	if len(groups) > 10 {
		return strings.Join(groups[:10], ", ") + ", …"
	}
	return strings.Join(groups, ", ")
}

// verified reads email_verified, which some providers send as a string.
func verified(raw json.RawMessage) bool {
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return b
	}
	var s string
	return json.Unmarshal(raw, &s) == nil && s == "true"
}

// stringList reads a claim that is a list of strings or one string;
// found is false when the claim is absent.
func stringList(raw json.RawMessage) (list []string, found bool, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, false, nil
	}
	if err := json.Unmarshal(raw, &list); err == nil {
		return list, true, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err != nil {
		return nil, true, errors.New("is neither a list of strings nor a string")
	}
	return []string{one}, true, nil
}
