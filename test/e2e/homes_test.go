package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/identity"
)

// TestHomes_KernelsWorkInTheirOwnersHome runs `nbkube local` with homes turned on (they are
// off by default there) and users ann (who is not an admin) and boss (who is): ann's
// notebook lands in her home, and her real kernel, started by a session of it, works in her
// home and lists only her files; boss's kernel works at the volume's root. (Not root: that is
// the name of the token's admin when the tests run as root, which the users file may not
// have.) The local node sandboxes the pods of several users, so this shows the mount (the
// kernel pod's subPath at its mount path); TestSandbox_KernelsOfUsersAreIsolated shows the
// wall.
func TestHomes_KernelsWorkInTheirOwnersHome(t *testing.T) {
	tokens := map[string]string{}
	var file strings.Builder
	file.WriteString("users:\n")
	for _, u := range []struct {
		name  string
		admin bool
	}{{"ann", false}, {"boss", true}} {
		tok, err := identity.NewUserToken(u.name)
		if err != nil {
			t.Fatal(err)
		}
		h, err := identity.HashSecret(tok)
		if err != nil {
			t.Fatal(err)
		}
		tokens[u.name] = tok
		fmt.Fprintf(&file, "- name: %s\n  admin: %v\n  token_hash: %q\n", u.name, u.admin, h)
	}
	usersFile := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(usersFile, []byte(file.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir, root := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "shared.txt"), []byte("the volume's"), 0o644); err != nil {
		t.Fatal(err)
	}
	inst := startLocal(t, dataDir, root, "--auth=users,token", "--users-file="+usersFile, "--user-home={username}")
	base := inst.api(t).base
	as := func(user string) *jupyterAPI { return newJupyterAPI(base, tokens[user], 2*time.Minute) }

	annHears := subscribeEvents(t, as("ann"))
	kernels := map[string]string{}

	emptyNB := map[string]any{"type": "notebook", "content": map[string]any{"cells": []any{}, "metadata": map[string]any{}, "nbformat": 4, "nbformat_minor": 5}}
	as("ann").call(t, http.MethodPut, "api/contents/x.ipynb", emptyNB).want(t, http.StatusCreated)
	if _, err := os.Stat(filepath.Join(root, "ann", "x.ipynb")); err != nil {
		t.Fatalf("ann's notebook is not in her home: %v", err)
	}

	// A kernel's working directory and what it lists there, hidden names left out.
	const probe = "import os; print(os.getcwd()); print(sorted(n for n in os.listdir('.') if not n.startswith('.')))"
	for _, tc := range []struct {
		user, home, cwd, list string
	}{
		// Pods are sandboxed (several users): each sees its home at its mount path.
		{"ann", "ann", builder.HomeDir + "/work", "['x.ipynb']"},
		{"boss", nbv1.HomeWholeVolume, builder.HomeDir + "/work", "['ann', 'shared.txt']"},
	} {
		var session struct {
			Kernel struct {
				ID string `json:"id"`
			} `json:"kernel"`
		}
		as(tc.user).call(t, http.MethodPost, "api/sessions", map[string]any{
			"path": "x.ipynb", "name": "x.ipynb", "type": "notebook", "kernel": map[string]string{"name": "python3"},
		}).want(t, http.StatusCreated).decode(t, &session)
		kernels[tc.user] = session.Kernel.ID
		kernel := &nbv1.Kernel{}
		if err := inst.client.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: session.Kernel.ID}, kernel); err != nil {
			t.Fatal(err)
		}
		if kernel.Spec.Home != tc.home {
			t.Errorf("%s's kernel has home %q, want %q", tc.user, kernel.Spec.Home, tc.home)
		}
		pod := &corev1.Pod{}
		if err := inst.client.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: session.Kernel.ID}, pod); err != nil {
			t.Fatal(err)
		}
		for _, m := range pod.Spec.Containers[0].VolumeMounts {
			if m.Name == "contents" && m.SubPath != strings.TrimPrefix(tc.home, "/") {
				t.Errorf("%s's kernel pod mounts the contents with subPath %q", tc.user, m.SubPath)
			}
		}
		ch := dialJupyterWS(t, as(tc.user), "api/kernels/"+session.Kernel.ID+"/channels", randomID())
		// The session answered once its kernel did.
		if err := ch.awaitKernelInfo(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		run := ch.run(probe)
		if want := tc.cwd + "\n" + tc.list + "\n"; run.Stdout.String() != want {
			t.Errorf("%s's kernel: %q, want %q (reply %v, stderr %q)", tc.user, run.Stdout.String(), want, run.Reply, run.Stderr.String())
		}
		ch.close()
	}

	// The admin acts on ann's kernel and on their own: ann hears what was done to hers (a
	// kernel event is its owner's, whoever acted), nothing of the admin's.
	as("boss").call(t, http.MethodPost, "api/kernels/"+kernels["boss"]+"/interrupt", nil).want(t, http.StatusNoContent)
	as("boss").call(t, http.MethodPost, "api/kernels/"+kernels["ann"]+"/interrupt", nil).want(t, http.StatusNoContent)
	// (Sessions start kernels without kernel_actions events, as Jupyter Server's do.)
	want := "interrupt " + kernels["ann"]
	got := annHears.until(t, 10*time.Second, want, func(m map[string]any) (string, bool) {
		if m["schema_id"] != kernelActionsSchema {
			return "", false
		}
		return fmt.Sprint(m["action"], " ", m["kernel_id"]), true
	})
	if got != want {
		t.Errorf("ann heard %s, want %s", got, want)
	}
}
