package server

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// BootstrapUsername is the user created by the first sign-in with the
// bootstrap admin token while no user exists yet.
const BootstrapUsername = "admin"

// Password length bounds (characters).
const (
	minPasswordLen = 10
	maxPasswordLen = 1000
)

// User is a person who signs in to the web console.
type User struct {
	ID           int64  `gorm:"primaryKey" json:"id"`
	Username     string `json:"username"`
	PasswordHash string `json:"-"`
	Role         Role   `json:"role"`
	Apps         string `json:"-"`
	// Source is how the user signs in: UserLocal (password) or UserSSO
	// (the identity provider; no password, role and grants from the
	// mapping rules at every sign-in).
	Source string `json:"source"`
	// Subject is "<issuer> <sub>" of a single sign-on user (nil: local).
	Subject *string `json:"-"`
	// Email is set only when the identity provider verified it.
	Email             string     `json:"email,omitempty"`
	DisabledAt        *time.Time `json:"disabled_at,omitempty"`
	PasswordChangedAt time.Time  `json:"password_changed_at"`
	CreatedBy         string     `json:"created_by"`
	CreatedAt         time.Time  `json:"created_at"`
	UpdatedAt         time.Time  `json:"updated_at"`
}

// TableName pins the table name.
func (User) TableName() string { return "users" }

// Target is how the audit log names the user.
func (u *User) Target() string { return "user/" + u.Username }

// Grants returns the apps an operator may change.
func (u *User) Grants() []string {
	if u.Apps == "" {
		return nil
	}
	return strings.Split(u.Apps, ",")
}

// How users sign in (User.Source).
const (
	UserLocal = "local"
	UserSSO   = "sso"
)

// Disabled reports whether the user may no longer sign in.
func (u *User) Disabled() bool { return u.DisabledAt != nil }

// Actor returns the user as the actor of a request.
func (u *User) Actor() Actor {
	return Actor{Name: u.Username, Kind: audit.ActorUser, Role: u.Role, Apps: u.Grants()}
}

// UserView is the representation of a user in the API and the audit log
// (never the password hash).
type UserView struct {
	User
	GrantedApps []string `json:"apps"`
	IsDisabled  bool     `json:"disabled"`
}

// View returns the API and audit representation.
func (u *User) View() UserView {
	return UserView{User: *u, GrantedApps: u.Grants(), IsDisabled: u.Disabled()}
}

// UserInput creates a user.
type UserInput struct {
	Username string   `json:"username"`
	Password string   `json:"password"`
	Role     Role     `json:"role"`
	Apps     []string `json:"apps"`
	Reason   string   `json:"reason"`
}

// UserPatch changes some fields of a user. Its JSON form is an RFC 7396
// merge patch (Patch) over the user's role, apps and disabled as the API
// shows them, plus the write-only password; Go callers may set the typed
// fields instead, each non-nil one a member of the patch. Users have no
// version: a patch naming one is refused.
type UserPatch struct {
	Reason   string
	Role     *Role
	Apps     *[]string
	Password *string
	Disabled *bool

	merge   json.RawMessage // the merge patch a JSON body gave
	version *int64          // the version a JSON body named, refused
}

// UnmarshalJSON takes a merge patch.
func (p *UserPatch) UnmarshalJSON(b []byte) error {
	var mp Patch
	if err := json.Unmarshal(b, &mp); err != nil {
		return err
	}
	*p = UserPatch{Reason: mp.Reason, merge: mp.Fields, version: mp.Version}
	return nil
}

// patch is the merge patch p stands for.
func (p *UserPatch) patch() Patch {
	if p.merge != nil {
		return Patch{Fields: p.merge}
	}
	return PatchOf(map[string]any{"role": p.Role, "apps": p.Apps, "password": p.Password, "disabled": p.Disabled})
}

// userFields are the fields of a user a patch merges over, as the API
// shows them, and the password a patch may set.
type userFields struct {
	Username string   `json:"username"`
	Role     Role     `json:"role"`
	Apps     []string `json:"apps"`
	Disabled bool     `json:"disabled"`
	Password *string  `json:"password"`
}

// apply merges the patch over u (a copy of cur, the stored user); now is
// when a disable or a new password takes effect. It returns the members
// the merged user cannot take.
func (p *UserPatch) apply(cur, u *User, now time.Time) FieldErrors {
	mp := p.patch()
	var in userFields
	v := mp.Merge(userFields{Role: cur.Role, Apps: cur.Grants(), Disabled: cur.Disabled()}, &in)
	refuseVersion(&v, "users", p.version)
	if mp.Names("username") {
		v.Add("username", "cannot be changed; create a user with the new name and disable this one")
	}
	u.Role, u.Apps = in.Role, strings.Join(in.Apps, ",")
	validateGrants(&v, u.Role, in.Apps)
	switch {
	case in.Disabled && u.DisabledAt == nil:
		u.DisabledAt = &now
	case !in.Disabled:
		u.DisabledAt = nil
	}
	if in.Password == nil {
		return v
	}
	validatePassword(&v, *in.Password)
	if cur.Source == UserSSO {
		v.Add("password", "this user signs in through single sign-on and has no password")
	}
	if len(v) > 0 {
		return v
	}
	if hash, err := hashPassword(*in.Password); err != nil {
		v.Add("password", err.Error())
	} else {
		u.PasswordHash, u.PasswordChangedAt = hash, now
	}
	return v
}

// validateGrants checks a role and its per-app grants (shared rules of
// users and tokens).
func validateGrants(v *FieldErrors, role Role, apps []string) {
	if !role.Valid() {
		v.Add("role", `must be "viewer", "operator" or "admin"`)
	}
	for i, app := range apps {
		if app != AllApps && !wire.ValidApp(app) {
			v.Add(fmt.Sprintf("apps[%d]", i), "is not a valid app name")
		}
	}
	if role == RoleOperator && len(apps) == 0 {
		v.Add("apps", `an operator needs at least one app (or "*")`)
	}
	if role != RoleOperator && len(apps) > 0 {
		v.Add("apps", "grants apply to operators only")
	}
}

func validatePassword(v *FieldErrors, pw string) {
	switch n := len([]rune(pw)); {
	case n < minPasswordLen:
		v.Add("password", fmt.Sprintf("must be at least %d characters", minPasswordLen))
	case n > maxPasswordLen:
		v.Add("password", fmt.Sprintf("must be at most %d characters", maxPasswordLen))
	}
}

// hashPassword bcrypts the base64 SHA-256 of pw, so passwords longer than
// bcrypt's 72 bytes still count in full.
func hashPassword(pw string) (string, error) {
	b, err := bcrypt.GenerateFromPassword(prehash(pw), bcrypt.DefaultCost)
	return string(b), err
}

func prehash(pw string) []byte {
	sum := sha256.Sum256([]byte(pw))
	return []byte(base64.StdEncoding.EncodeToString(sum[:]))
}

// dummyHash is compared against when the user does not exist, so a wrong
// username costs as much time as a wrong password.
var dummyHash, _ = hashPassword("switchyard-dummy-password")

// ListUsers returns one page of the users by name (Page{}: all) and the
// cursor of the next page.
func (s *Service) ListUsers(ctx context.Context, pg Page) ([]User, string, error) {
	var out []User
	if err := pg.ByName(s.db.WithContext(ctx), "username").Find(&out).Error; err != nil {
		return nil, "", unavailable(err)
	}
	out, next := Cut(out, pg, func(u *User) string { return u.Username })
	return out, next, nil
}

// GetUser returns one user by id.
func (s *Service) GetUser(ctx context.Context, id int64) (*User, error) {
	var u User
	if err := s.db.WithContext(ctx).Where("id = ?", id).Take(&u).Error; err != nil {
		return nil, mapDBError(err)
	}
	return &u, nil
}

// userChange is the audited change of a user: admins only, nothing to
// publish.
func userChange(a Actor, action audit.Action, reason string, apply func(tx *gorm.DB) (string, any, any, error)) change {
	return change{
		Actor: a, Action: action, Reason: reason,
		Authorize: func(a Actor) error { return a.mayAdmin("manage users") },
		Apply:     apply,
	}
}

// CreateUser adds a user; only admins may.
func (s *Service) CreateUser(ctx context.Context, a Actor, in UserInput) (*User, error) {
	var u *User
	_, err := s.commit(ctx, userChange(a, audit.UserCreate, in.Reason, func(tx *gorm.DB) (string, any, any, error) {
		var v FieldErrors
		if !wire.ValidName(in.Username) {
			v.Add("username", "must match ^[a-z0-9][a-z0-9._-]{0,62}$")
		}
		validatePassword(&v, in.Password)
		validateGrants(&v, in.Role, in.Apps)
		if err := v.Err(); err != nil {
			return "", nil, nil, err
		}
		var err error
		if u, err = s.newUser(in.Username, in.Password, in.Role, in.Apps, a.Name); err != nil {
			return "", nil, nil, err
		}
		return insertUser(tx, u)
	}))
	if errors.Is(err, ErrAlreadyExists) {
		return nil, &ExistsError{Field: "username", Name: "user " + in.Username}
	}
	if err != nil {
		return nil, err
	}
	return u, nil
}

func (s *Service) newUser(name, password string, role Role, apps []string, by string) (*User, error) {
	hash, err := hashPassword(password)
	if err != nil {
		return nil, invalid("password", err.Error())
	}
	now := s.now()
	return &User{
		Username: name, PasswordHash: hash, Role: role, Apps: strings.Join(apps, ","), Source: UserLocal,
		PasswordChangedAt: now, CreatedBy: by, CreatedAt: now, UpdatedAt: now,
	}, nil
}

func insertUser(tx *gorm.DB, u *User) (string, any, any, error) {
	if err := tx.Create(u).Error; err != nil {
		return "", nil, nil, err
	}
	return u.Target(), nil, u.View(), nil
}

// loadUser reads a user by name, or ErrNotFound.
func loadUser(tx *gorm.DB, username string) (*User, error) {
	var u User
	if err := tx.Where("username = ?", username).Take(&u).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, fmt.Errorf("%w: user %s", ErrNotFound, username)
		}
		return nil, err
	}
	return &u, nil
}

// saveUser writes next over cur and, when credentials or powers changed,
// runs the OnCredentialsChange hooks (which end the user's sessions).
func (s *Service) saveUser(tx *gorm.DB, cur, next *User) (string, any, any, error) {
	if err := tx.Model(&User{}).Where("id = ?", cur.ID).Select("*").Omit("id", "created_at").Updates(next).Error; err != nil {
		return "", nil, nil, err
	}
	if next.PasswordHash != cur.PasswordHash || next.Disabled() || next.Role != cur.Role {
		for _, fn := range s.credentialsChanged {
			if err := fn(tx, cur.ID); err != nil {
				return "", nil, nil, err
			}
		}
	}
	return next.Target(), cur.View(), next.View(), nil
}

// UpdateUser changes a user's role, grants, password or disabled flag; only
// admins may, and an admin cannot disable or demote themselves. A change of
// password, role, grants or the disabled flag ends the user's sessions.
func (s *Service) UpdateUser(ctx context.Context, a Actor, username string, p UserPatch) (*User, error) {
	action := audit.UserUpdate
	if mp := p.patch(); mp.Names("password") && !mp.Names("role") && !mp.Names("apps") && !mp.Names("disabled") {
		action = audit.UserPassword
	}
	var out *User
	_, err := s.commit(ctx, userChange(a, action, p.Reason, func(tx *gorm.DB) (string, any, any, error) {
		cur, err := loadUser(tx, username)
		if err != nil {
			return "", nil, nil, err
		}
		next := *cur
		now := s.now()
		v := p.apply(cur, &next, now)
		if cur.Username == a.Name && (next.Role != RoleAdmin || next.Disabled()) {
			v.Add("role", "you cannot demote or disable yourself; ask another admin")
		}
		if err := v.Err(); err != nil {
			return "", nil, nil, err
		}
		next.UpdatedAt = now
		out = &next
		return s.saveUser(tx, cur, &next)
	}))
	return out, err
}

// SignIn checks a username and password and returns the user. While no user
// exists, signing in as BootstrapUsername with an admin API token (the
// bootstrap token) as the password creates that admin user with that
// password; change it afterwards. Wrong credentials give ErrUnauthorized.
func (s *Service) SignIn(ctx context.Context, username, password string) (*User, error) {
	var u User
	err := s.db.WithContext(ctx).Where("username = ?", username).Take(&u).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		if username == BootstrapUsername {
			if nu, err := s.bootstrapAdmin(ctx, password); nu != nil || !errors.Is(err, ErrUnauthorized) {
				return nu, err
			}
		}
		_ = bcrypt.CompareHashAndPassword([]byte(dummyHash), prehash(password))
		return nil, ErrUnauthorized
	case err != nil:
		return nil, unavailable(err)
	}
	if u.Source == UserSSO {
		// No password to check: burn the same time as a wrong one.
		_ = bcrypt.CompareHashAndPassword([]byte(dummyHash), prehash(password))
		return nil, ErrUnauthorized
	}
	if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), prehash(password)) != nil || u.Disabled() {
		return nil, ErrUnauthorized
	}
	return &u, nil
}

// bootstrapAdmin creates the first user from an admin token.
func (s *Service) bootstrapAdmin(ctx context.Context, token string) (*User, error) {
	a, err := s.Authenticate(ctx, token)
	if err != nil || a.Role != RoleAdmin {
		return nil, ErrUnauthorized
	}
	u, err := s.newUser(BootstrapUsername, token, RoleAdmin, nil, a.Name)
	if err != nil {
		return nil, err
	}
	if n, err := s.CountUsers(ctx); err != nil || n > 0 {
		if err == nil {
			err = ErrUnauthorized
		}
		return nil, err
	}
	// Two racing first sign-ins: the unique username lets one win.
	_, err = s.commit(ctx, userChange(a, audit.UserCreate, "first sign-in with the bootstrap admin token",
		func(tx *gorm.DB) (string, any, any, error) { return insertUser(tx, u) }))
	if err != nil {
		if errors.Is(err, ErrAlreadyExists) {
			err = ErrUnauthorized
		}
		return nil, err
	}
	return u, nil
}

// UserByName returns one user by username.
func (s *Service) UserByName(ctx context.Context, username string) (*User, error) {
	u, err := loadUser(s.db.WithContext(ctx), username)
	return u, mapDBError(err)
}

// CountUsers returns how many users exist (0 before the first sign-in).
func (s *Service) CountUsers(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.WithContext(ctx).Model(&User{}).Count(&n).Error; err != nil {
		return 0, unavailable(err)
	}
	return n, nil
}

// ChangeOwnPassword lets a signed-in user replace their password after
// proving the current one. The user's sessions end; the caller starts a new
// one.
func (s *Service) ChangeOwnPassword(ctx context.Context, a Actor, current, next string) error {
	if a.Kind != audit.ActorUser {
		return fmt.Errorf("%w: only people have passwords", ErrForbidden)
	}
	u, err := s.SignIn(ctx, a.Name, current)
	if errors.Is(err, ErrUnauthorized) {
		return invalid("current", "is not your current password")
	} else if err != nil {
		return err
	}
	var v FieldErrors
	validatePassword(&v, next)
	if err := v.Err(); err != nil {
		return err
	}
	hash, err := hashPassword(next)
	if err != nil {
		return invalid("password", err.Error())
	}
	// A person may change their own password: the change is theirs, not an
	// admin's, so it authorizes itself.
	_, err = s.commit(ctx, change{
		Actor: a, Action: audit.UserPassword, Reason: "changed own password",
		Authorize: func(Actor) error { return nil },
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			next := *u
			next.PasswordHash, next.PasswordChangedAt, next.UpdatedAt = hash, s.now(), s.now()
			return s.saveUser(tx, u, &next)
		},
	})
	return err
}
