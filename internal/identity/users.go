package identity

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"
)

// KindUsers is the provider of a users file.
const KindUsers = "users"

// TokenPrefix starts the tokens of the users file. A token is TokenPrefix, the user's name,
// "_" and a secret without "_": the name tells which user's hash to verify, so a request
// costs one hash verification (and none while the cache is warm) however many users there
// are, where salted hashes could not be looked up by the token itself.
const TokenPrefix = "nbk_"

// DefaultUsersFileCheck is how often the users file is read again for changes.
const DefaultUsersFileCheck = 2 * time.Second

// UsersFileEntry is one user of a users file.
type UsersFileEntry struct {
	// Name identifies the user: letters, digits and ".-_@+", starting with a letter or digit;
	// resources record it as their owner.
	Name string `json:"name"`
	// DisplayName is how pages show the user.
	DisplayName string `json:"display_name,omitempty"`
	// Groups of the user.
	Groups []string `json:"groups,omitempty"`
	// Admin users see and touch everyone's resources.
	Admin bool `json:"admin,omitempty"`
	// ActAs lets the user act for others (a gateway naming a kernel's user).
	ActAs bool `json:"act_as,omitempty"`
	// TokenHash is the argon2id (PHC) or bcrypt hash of the user's API token.
	TokenHash string `json:"token_hash,omitempty"`
	// PasswordHash is the argon2id (PHC) or bcrypt hash of the user's password.
	PasswordHash string `json:"password_hash,omitempty"`
}

// UsersFileContent is what a users file holds, in YAML (or JSON, which is YAML too).
type UsersFileContent struct {
	Users []UsersFileEntry `json:"users"`
}

var userName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,252}$`)

// usersTable is one good version of the file.
type usersTable struct {
	sum   [sha256.Size]byte
	users map[string]*UsersFileEntry
}

// UsersFile is the provider of a users file. The file is read again when it changes, at most
// every check interval and only when asked, so that no goroutine has to be owned and every
// answer is at most one interval behind the file. Reading follows symlinks, so a Kubernetes
// Secret volume's atomic swap of its ..data link is seen like any other change. A file that
// no longer parses leaves the last good version in use and is logged, without its content.
type UsersFile struct {
	path     string
	every    time.Duration
	clock    clock.PassiveClock
	log      logr.Logger
	reserved map[string]string

	table     atomic.Pointer[usersTable]
	reloading sync.Mutex
	checked   time.Time // guarded by reloading
	// tokenSlots and passwordSlots bound the hash verifications running at once, each
	// taking tens of megabytes and milliseconds: a flood of made-up tokens, which anyone can
	// send, takes half the CPUs at most, and never the slots of the login form's passwords.
	tokenSlots, passwordSlots chan struct{}
}

// UsersFileOptions configure a UsersFile.
type UsersFileOptions struct {
	// CheckEvery is how often the file is read again; DefaultUsersFileCheck when zero.
	CheckEvery time.Duration
	// Clock is the real clock when nil.
	Clock clock.PassiveClock
	// Log receives reload failures.
	Log logr.Logger
	// Reserved are names other providers' users have, each with the words saying whose it
	// is (e.g. "the token's user"): a file that names one of them is not valid, at start or
	// later, since the two users would own each other's resources.
	Reserved map[string]string
}

// NewUsersFile reads the users file at path; a file that cannot be read or is not valid is
// an error, so that a server never starts with users it did not mean.
func NewUsersFile(path string, o UsersFileOptions) (*UsersFile, error) {
	if o.CheckEvery <= 0 {
		o.CheckEvery = DefaultUsersFileCheck
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	half := max(1, runtime.GOMAXPROCS(0)/2)
	p := &UsersFile{path: path, every: o.CheckEvery, clock: o.Clock, log: o.Log, reserved: o.Reserved,
		tokenSlots: make(chan struct{}, half), passwordSlots: make(chan struct{}, half)}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("users file: %w", err)
	}
	t, err := parseUsersFile(data, o.Reserved)
	if err != nil {
		return nil, fmt.Errorf("users file %s: %w", path, err)
	}
	p.table.Store(t)
	p.checked = o.Clock.Now()
	return p, nil
}

// parseUsersFile checks a users file's content: every user named once, validly, by a name
// not reserved to another provider's user, with hashes that VerifySecret can check.
func parseUsersFile(data []byte, reserved map[string]string) (*usersTable, error) {
	var c UsersFileContent
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("not a users file: %w", err)
	}
	t := &usersTable{sum: sha256.Sum256(data), users: make(map[string]*UsersFileEntry, len(c.Users))}
	for i := range c.Users {
		u := &c.Users[i]
		if !userName.MatchString(u.Name) {
			return nil, fmt.Errorf("user %d: name %q is not letters, digits and .-_@+ (at most 253)", i+1, u.Name)
		}
		if _, dup := t.users[u.Name]; dup {
			return nil, fmt.Errorf("user %q appears twice", u.Name)
		}
		if whose, ok := reserved[u.Name]; ok {
			return nil, fmt.Errorf("user %q has the name of %s: they would own each other's kernels, sessions and files; give the file's user another name", u.Name, whose)
		}
		if u.TokenHash == "" && u.PasswordHash == "" {
			return nil, fmt.Errorf("user %q has neither token_hash nor password_hash", u.Name)
		}
		for field, h := range map[string]string{"token_hash": u.TokenHash, "password_hash": u.PasswordHash} {
			if h == "" {
				continue
			}
			if err := CheckHash(h); err != nil {
				return nil, fmt.Errorf("user %q: %s is neither argon2id nor bcrypt: %w", u.Name, field, err)
			}
		}
		t.users[u.Name] = u
	}
	return t, nil
}

// Kind is "users".
func (*UsersFile) Kind() string { return KindUsers }

// current is the table in use, read again first when the check interval has passed. Only
// one request reads the file; the others go on with the table they have.
func (p *UsersFile) current() *usersTable {
	if p.reloading.TryLock() {
		if now := p.clock.Now(); now.Sub(p.checked) >= p.every {
			p.checked = now
			p.reload()
		}
		p.reloading.Unlock()
	}
	return p.table.Load()
}

func (p *UsersFile) reload() {
	data, err := os.ReadFile(p.path)
	if err != nil {
		p.log.Error(err, "Cannot read the users file; the last good version stays in use", "path", p.path)
		return
	}
	if sum := sha256.Sum256(data); bytes.Equal(sum[:], p.table.Load().sum[:]) {
		return
	}
	t, err := parseUsersFile(data, p.reserved)
	if err != nil {
		p.log.Error(err, "The users file is not valid; the last good version stays in use", "path", p.path)
		return
	}
	p.table.Store(t)
	p.log.Info("Users file reloaded", "path", p.path, "users", len(t.users))
}

func (e *UsersFileEntry) user() *User {
	return &User{Name: e.Name, DisplayName: e.DisplayName, Groups: append([]string(nil), e.Groups...),
		Admin: e.Admin, ActAs: e.ActAs, Provider: KindUsers, Credential: Fingerprint(KindUsers, e.TokenHash, e.PasswordHash)}
}

// dummyHash stands in for the hash of a user the file does not have, or who has no such
// credential: verifying it takes as long as verifying a real one, so that how long a refusal
// takes does not tell which names are users.
var dummyHash = sync.OnceValue(func() string {
	h, _ := HashSecret(rand.Text())
	return h
})

// verify checks secret against a stored hash (the dummy hash when there is none), waiting
// for one of slots.
func (p *UsersFile) verify(ctx context.Context, slots chan struct{}, hash, secret string) (bool, error) {
	known := hash != ""
	if !known {
		hash = dummyHash()
	}
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer func() { <-slots }()
	return VerifySecret(hash, secret) && known, nil
}

// AuthenticateToken answers for tokens of the form nbk_<name>_<secret>; other tokens are
// not the file's.
func (p *UsersFile) AuthenticateToken(ctx context.Context, token string) (*User, error) {
	name, ok := tokenUser(token)
	if !ok {
		return nil, nil
	}
	e := p.current().users[name]
	var hash string
	if e != nil {
		hash = e.TokenHash
	}
	good, err := p.verify(ctx, p.tokenSlots, hash, token)
	if err != nil || !good {
		return nil, err
	}
	return e.user(), nil
}

// AuthenticatePassword returns the user whose password it is; nil for a wrong password or
// an unknown user.
func (p *UsersFile) AuthenticatePassword(ctx context.Context, name, password string) (*User, error) {
	e := p.current().users[name]
	var hash string
	if e != nil {
		hash = e.PasswordHash
	}
	good, err := p.verify(ctx, p.passwordSlots, hash, password)
	if err != nil || !good {
		return nil, err
	}
	return e.user(), nil
}

// Lookup is the user as the file has them now.
func (p *UsersFile) Lookup(_ context.Context, name string) (*User, error) {
	e := p.current().users[name]
	if e == nil {
		return nil, nil
	}
	return e.user(), nil
}

// ClaimsName claims the names of the file's users, as the file has them now: no other
// provider's user may have one.
func (p *UsersFile) ClaimsName(name string) bool {
	_, ok := p.current().users[name]
	return ok
}

// tokenUser is the user a users-file token names.
func tokenUser(token string) (string, bool) {
	rest, ok := strings.CutPrefix(token, TokenPrefix)
	if !ok {
		return "", false
	}
	i := strings.LastIndexByte(rest, '_')
	if i <= 0 || i == len(rest)-1 {
		return "", false
	}
	return rest[:i], true
}

// NewUserToken makes a random token for the user of that name, with 256 bits of secret in
// base32, which has no "_".
func NewUserToken(name string) (string, error) {
	if !userName.MatchString(name) {
		return "", errors.New("a user name is letters, digits and .-_@+, starting with a letter or digit")
	}
	return TokenPrefix + name + "_" + rand.Text() + rand.Text(), nil
}
