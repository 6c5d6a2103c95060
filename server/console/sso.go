package console

import (
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/oidc"
	"github.com/switchyard-io/switchyard/server/webui"
)

// OIDCConfig is single sign-on to the web console through an OpenID
// Connect identity provider (docs/sso.md). An empty Issuer turns it off.
type OIDCConfig struct {
	Issuer   string
	ClientID string
	// ClientSecret: SWITCHYARD_OIDC_CLIENT_SECRET, or the file its _FILE
	// or --oidc-client-secret-file names (read by LoadEnv and the flags);
	// ClientSecretFile names such a file for a Config built in Go.
	ClientSecret     string
	ClientSecretFile string
	Scopes           []string
	GroupsClaim      string
	// RulesFile holds the JSON rules mapping groups to roles and grants.
	RulesFile   string
	DefaultRole string
	RedirectURL string
	Name        string
}

type settingError struct{ flag, msg string }

// validateSSO checks the single sign-on settings; each error names its
// setting.
func (c *Config) validateSSO() []settingError {
	var errs []settingError
	bad := func(flag, format string, args ...any) {
		errs = append(errs, settingError{flag, fmt.Sprintf(format, args...)})
	}
	if !slices.Contains([]string{webui.LocalAll, webui.LocalAdmins, webui.LocalBreakGlass}, c.LocalSignIn) {
		bad("local-sign-in", "must be all, admins or break-glass")
	}
	o := c.OIDC
	if o.Issuer == "" {
		if o.ClientID != "" || o.RulesFile != "" || o.ClientSecretFile != "" {
			bad("oidc-issuer", "is required when other --oidc-* settings are set")
		}
		return errs
	}
	if u, err := url.Parse(o.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		bad("oidc-issuer", "%q is not an http(s) URL", o.Issuer)
	}
	if o.ClientID == "" {
		bad("oidc-client-id", "is required with --oidc-issuer")
	}
	if _, err := o.secret(); err != nil {
		bad("oidc-client-secret", "%v", err)
	}
	if o.RedirectURL != "" {
		if u, err := url.Parse(o.RedirectURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("oidc-redirect-url", "%q is not an http(s) URL", o.RedirectURL)
		}
	}
	switch server.Role(o.DefaultRole) {
	case "", server.RoleViewer, server.RoleAdmin:
	default:
		bad("oidc-default-role", `must be empty (strict), "viewer" or "admin"`)
	}
	if o.RulesFile == "" && o.DefaultRole == "" {
		bad("oidc-rules-file", "is required: without rules and without --oidc-default-role nobody could sign in")
	}
	if _, err := o.rules(); err != nil {
		bad("oidc-rules-file", "%v", err)
	}
	return errs
}

// secret is the client secret from the environment or the file.
func (o OIDCConfig) secret() (string, error) {
	switch {
	case o.ClientSecret != "" && o.ClientSecretFile != "":
		return "", fmt.Errorf("set SWITCHYARD_OIDC_CLIENT_SECRET or the file, not both")
	case o.ClientSecretFile != "":
		b, err := os.ReadFile(o.ClientSecretFile)
		if err != nil {
			return "", err
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", fmt.Errorf("%s is empty", o.ClientSecretFile)
		}
		return s, nil
	}
	// A public client (PKCE only) has no secret.
	return o.ClientSecret, nil
}

func (o OIDCConfig) rules() ([]oidc.Rule, error) {
	if o.RulesFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(o.RulesFile)
	if err != nil {
		return nil, err
	}
	return oidc.ParseRules(b)
}

// signIn is the web UI's sign-in configuration: the identity provider
// when one is set, and the local accounts' policy.
func (c *Console) signIn() (webui.SignIn, error) {
	o := c.Config.OIDC
	s := webui.SignIn{Local: c.Config.LocalSignIn, RedirectURL: o.RedirectURL}
	if o.Issuer == "" {
		return s, nil
	}
	secret, err := o.secret()
	if err != nil {
		return s, hint(fmt.Errorf("console: oidc client secret: %w", err), "check", "oidc-client-secret-file")
	}
	rules, err := o.rules()
	if err != nil {
		return s, hint(fmt.Errorf("console: %w", err), "check", "oidc-rules-file")
	}
	s.SSO, err = oidc.New(oidc.Config{
		Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: secret, Scopes: o.Scopes,
		GroupsClaim: o.GroupsClaim, Rules: rules, DefaultRole: server.Role(o.DefaultRole), Name: o.Name,
	})
	if err != nil {
		return s, hint(fmt.Errorf("console: %w", err), "check", "oidc-issuer")
	}
	return s, nil
}
