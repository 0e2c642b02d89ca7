package identity_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/testenv"
)

// secretVolume writes files the way the kubelet fills a Secret volume: the files are
// symlinks through ..data to a timestamped directory, and an update makes a new directory and
// renames a new ..data link over the old one, atomically.
type secretVolume struct {
	t   *testing.T
	dir string
	n   int
}

func newSecretVolume(t *testing.T, files map[string]string) *secretVolume {
	v := &secretVolume{t: t, dir: t.TempDir()}
	v.update(files)
	for name := range files {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(v.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

func (v *secretVolume) update(files map[string]string) {
	v.t.Helper()
	v.n++
	ts := fmt.Sprintf("..2026_11_25_17_00_00.%d", v.n)
	if err := os.Mkdir(filepath.Join(v.dir, ts), 0o755); err != nil {
		v.t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(v.dir, ts, name), []byte(content), 0o644); err != nil {
			v.t.Fatal(err)
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		v.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		v.t.Fatal(err)
	}
}

type testUser struct {
	name, token, password string
	admin, actAs          bool
}

func usersYAML(t *testing.T, users ...testUser) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("users:\n")
	for _, u := range users {
		fmt.Fprintf(&b, "- name: %s\n  display_name: %s Example\n  groups: [staff]\n  admin: %v\n  act_as: %v\n", u.name, u.name, u.admin, u.actAs)
		if u.token != "" {
			h, err := identity.HashSecret(u.token)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "  token_hash: %q\n", h)
		}
		if u.password != "" {
			h, err := identity.HashSecret(u.password)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "  password_hash: %q\n", h)
		}
	}
	return b.String()
}

func newToken(t *testing.T, name string) string {
	t.Helper()
	tok, err := identity.NewUserToken(name)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestUsersFile_TokensAndPasswordsOfItsUsers(t *testing.T) {
	ann, boss := newToken(t, "ann.lee@example.org"), newToken(t, "boss")
	v := newSecretVolume(t, map[string]string{"users.yaml": usersYAML(t,
		testUser{name: "ann.lee@example.org", token: ann, password: "ann's password"},
		testUser{name: "boss", token: boss, admin: true, actAs: true})})
	p, err := identity.NewUsersFile(filepath.Join(v.dir, "users.yaml"), identity.UsersFileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	u, err := p.AuthenticateToken(ctx, ann)
	if err != nil || u == nil || u.Name != "ann.lee@example.org" || u.DisplayName != "ann.lee@example.org Example" ||
		len(u.Groups) != 1 || u.Admin || u.ActAs || u.Provider != identity.KindUsers || u.Credential == "" {
		t.Fatalf("ann's token: %+v, %v", u, err)
	}
	if u, _ := p.AuthenticateToken(ctx, boss); u == nil || !u.Admin || !u.ActAs {
		t.Fatalf("boss's token: %+v", u)
	}
	otherLast := "A"
	if strings.HasSuffix(ann, otherLast) {
		otherLast = "B"
	}
	// Another user's name on a good secret, a made-up secret, other providers' tokens: not
	// the file's.
	for _, tok := range []string{
		strings.Replace(ann, "ann.lee@example.org", "boss", 1),
		ann[:len(ann)-1] + otherLast,
		"nbk_nobody_SECRET",
		"plain-token",
		"nbk_",
		"nbk_ann_",
	} {
		if u, err := p.AuthenticateToken(ctx, tok); u != nil || err != nil {
			t.Errorf("token %q: %+v %v", tok, u, err)
		}
	}
	if u, _ := p.AuthenticatePassword(ctx, "ann.lee@example.org", "ann's password"); u == nil {
		t.Errorf("ann's password refused")
	}
	if u, _ := p.AuthenticatePassword(ctx, "ann.lee@example.org", "wrong"); u != nil {
		t.Errorf("a wrong password accepted")
	}
	if u, _ := p.AuthenticatePassword(ctx, "boss", ""); u != nil {
		t.Errorf("boss has no password, yet one was accepted")
	}
	if u, _ := p.Lookup(ctx, "boss"); u == nil || !u.Admin {
		t.Errorf("lookup of boss: %+v", u)
	}
	if u, _ := p.Lookup(ctx, "nobody"); u != nil {
		t.Errorf("lookup of nobody: %+v", u)
	}
}

func TestUsersFile_FollowsTheSecretVolumesSwapAndKeepsTheLastGoodVersion(t *testing.T) {
	ann1, ann2, bob := newToken(t, "ann"), newToken(t, "ann"), newToken(t, "bob")
	v := newSecretVolume(t, map[string]string{"users.yaml": usersYAML(t, testUser{name: "ann", token: ann1}, testUser{name: "bob", token: bob})})
	clk := clocktesting.NewFakePassiveClock(time.Now())
	var logs testenv.LogLines
	p, err := identity.NewUsersFile(filepath.Join(v.dir, "users.yaml"), identity.UsersFileOptions{CheckEvery: 2 * time.Second, Clock: clk, Log: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	before, _ := p.Lookup(ctx, "ann")

	// Ann's token rotates and bob goes.
	v.update(map[string]string{"users.yaml": usersYAML(t, testUser{name: "ann", token: ann2})})
	if u, _ := p.Lookup(ctx, "bob"); u == nil {
		t.Fatalf("the file was read again before the check interval")
	}
	clk.SetTime(clk.Now().Add(2 * time.Second))
	if u, _ := p.Lookup(ctx, "bob"); u != nil {
		t.Errorf("bob is still known after the swap: %+v", u)
	}
	if u, _ := p.AuthenticateToken(ctx, ann1); u != nil {
		t.Errorf("ann's old token still works")
	}
	after, _ := p.AuthenticateToken(ctx, ann2)
	if after == nil || after.Credential == before.Credential {
		t.Fatalf("ann's new token: %+v; fingerprint before %q", after, before.Credential)
	}

	// A broken file: the last good version stays, and the log says so without a secret.
	v.update(map[string]string{"users.yaml": "users:\n- name: ann\n  token_hash: " + ann2 + "\n  tokn_hash: x\n"})
	clk.SetTime(clk.Now().Add(2 * time.Second))
	if u, _ := p.AuthenticateToken(ctx, ann2); u == nil {
		t.Errorf("a broken file replaced the last good one")
	}
	if l := logs.String(); !strings.Contains(l, "not valid") || strings.Contains(l, ann2) || strings.Contains(l, "$argon2id") {
		t.Errorf("log of the broken file: %s", l)
	}
}

func TestUsersFile_RefusesToStartWithABrokenFile(t *testing.T) {
	dir := t.TempDir()
	good, err := identity.HashSecret("x")
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"unknown field":   "users:\n- name: ann\n  token_hash: '" + good + "'\n  admn: true\n",
		"no credential":   "users:\n- name: ann\n",
		"plain password":  "users:\n- name: ann\n  password_hash: hunter2\n",
		"twice":           "users:\n- name: ann\n  token_hash: '" + good + "'\n- name: ann\n  token_hash: '" + good + "'\n",
		"bad name":        "users:\n- name: ann/../x\n  token_hash: '" + good + "'\n",
		"not even a list": "users: ann\n",
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := identity.NewUsersFile(path, identity.UsersFileOptions{})
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error shows the file's secret: %v", name, err)
		}
	}
	if _, err := identity.NewUsersFile(filepath.Join(dir, "missing"), identity.UsersFileOptions{}); err == nil {
		t.Errorf("a missing file: accepted")
	}
}

func TestNewUserToken_NamesItsUser(t *testing.T) {
	tok := newToken(t, "a_b")
	if !strings.HasPrefix(tok, "nbk_a_b_") || len(tok) < len("nbk_a_b_")+50 {
		t.Errorf("token %q", tok)
	}
	if _, err := identity.NewUserToken("../x"); err == nil {
		t.Errorf("a token for a bad name")
	}
}

func TestChain_PasswordsGoToTheProvidersThatCheckThem(t *testing.T) {
	v := newSecretVolume(t, map[string]string{"users.yaml": usersYAML(t, testUser{name: "ann", password: "pw"})})
	users, err := identity.NewUsersFile(filepath.Join(v.dir, "users.yaml"), identity.UsersFileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var _ identity.PasswordProvider = users
	chain := identity.Chain{identity.NewToken("pw", identity.User{Name: "tok"}), users}
	if u, err := chain.AuthenticatePassword(t.Context(), "ann", "pw"); err != nil || u == nil || u.Provider != identity.KindUsers {
		t.Errorf("ann's password: %+v %v", u, err)
	}
	if u, err := chain.AuthenticatePassword(t.Context(), "ann", "nope"); err != nil || u != nil {
		t.Errorf("a wrong password: %+v %v", u, err)
	}
}

// median is the median time of f over n runs.
func median(n int, f func()) time.Duration {
	times := make([]time.Duration, n)
	for i := range times {
		start := time.Now()
		f()
		times[i] = time.Since(start)
	}
	slices.Sort(times)
	return times[n/2]
}

func TestUsersFile_UnknownNamesTakeAsLongAsKnownOnes(t *testing.T) {
	ann := newToken(t, "ann")
	v := newSecretVolume(t, map[string]string{"users.yaml": usersYAML(t,
		testUser{name: "ann", token: ann, password: "ann's password"}, testUser{name: "tok", token: newToken(t, "tok")})})
	p, err := identity.NewUsersFile(filepath.Join(v.dir, "users.yaml"), identity.UsersFileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	// The first made-up name makes the stand-in hash.
	_, _ = p.AuthenticatePassword(ctx, "nobody", "x")
	for _, c := range []struct {
		what         string
		known, other func()
	}{
		{"a password of no user", func() { _, _ = p.AuthenticatePassword(ctx, "ann", "wrong") },
			func() { _, _ = p.AuthenticatePassword(ctx, "nobody", "wrong") }},
		{"a password of a user without one", func() { _, _ = p.AuthenticatePassword(ctx, "ann", "wrong") },
			func() { _, _ = p.AuthenticatePassword(ctx, "tok", "wrong") }},
		{"a token of no user", func() { _, _ = p.AuthenticateToken(ctx, "nbk_ann_WRONG") },
			func() { _, _ = p.AuthenticateToken(ctx, "nbk_nobody_WRONG") }},
	} {
		known, other := median(7, c.known), median(7, c.other)
		// A hash takes milliseconds, a map lookup microseconds: a third leaves room for the
		// noise of a busy machine and none for a name that is refused without a hash.
		if other*3 < known {
			t.Errorf("%s is refused in %v, a wrong one of a user in %v: the time tells which names are users", c.what, other, known)
		}
	}
	if u, err := p.AuthenticatePassword(ctx, "nobody", "x"); u != nil || err != nil {
		t.Errorf("an unknown name: %+v %v", u, err)
	}
}

func TestUsersFile_AFloodOfTokensLeavesLoginsTheirOwnVerifications(t *testing.T) {
	ann := newToken(t, "ann")
	v := newSecretVolume(t, map[string]string{"users.yaml": usersYAML(t, testUser{name: "ann", token: ann, password: "pw"})})
	p, err := identity.NewUsersFile(filepath.Join(v.dir, "users.yaml"), identity.UsersFileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Every token verification slot is taken, as by a flood of made-up tokens.
	release := identity.HoldTokenVerifications(p)
	defer release()
	short, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if u, err := p.AuthenticateToken(short, ann); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a token while the flood holds every slot: %+v %v, want to wait for a slot", u, err)
	}
	long, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if u, err := p.AuthenticatePassword(long, "ann", "pw"); err != nil || u == nil {
		t.Errorf("a login during the flood: %+v %v", u, err)
	}
}
