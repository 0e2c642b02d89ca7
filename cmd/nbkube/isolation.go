package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nbkube/nbkube/internal/builder"
)

// sandboxMode is --sandbox: auto (the default) sandboxes pods when a provider may know users
// besides the token's, true always, false never.
type sandboxMode struct {
	set, on bool
}

func (m *sandboxMode) String() string {
	if m == nil || !m.set {
		return "auto"
	}
	return strconv.FormatBool(m.on)
}

func (m *sandboxMode) Set(s string) error {
	if s == "auto" {
		*m = sandboxMode{}
		return nil
	}
	on, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want auto, true or false")
	}
	*m = sandboxMode{set: true, on: on}
	return nil
}

// IsBoolFlag lets a bare --sandbox mean true.
func (m *sandboxMode) IsBoolFlag() bool { return true }

// enabled tells whether pods are sandboxed, given whether several users share them.
func (m *sandboxMode) enabled(multiUser bool) bool {
	if m.set {
		return m.on
	}
	return multiUser
}

// errNoSandbox is the refusal to share pods among users on a machine that cannot sandbox
// them.
var errNoSandbox = errors.New("this machine cannot run pods in namespaces of their own (it needs unprivileged user namespaces)")

// checkIsolation refuses to sandbox on a machine that cannot, saying why and what the choices
// are, and warns when several users share pods that are processes of this machine's user.
func checkIsolation(mode sandboxMode, multiUser bool, check func() error, progress func(string, ...any)) error {
	if !mode.enabled(multiUser) {
		if multiUser {
			progress("warning: with --sandbox=false, every user's kernels run as this machine's user and can read the other users' homes and nbkube's data (docs/local.md#sandboxes)")
		}
		return nil
	}
	err := check()
	switch {
	case err == nil:
		return nil
	case mode.set:
		return fmt.Errorf("--sandbox: %w: %w", errNoSandbox, err)
	default:
		return fmt.Errorf("several users would share pods that are not isolated from each other: %w: %w; "+
			"allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or kernel.apparmor_restrict_unprivileged_userns=0), "+
			"or run with --sandbox=false if every user may read every other user's files (docs/local.md#sandboxes)", errNoSandbox, err)
	}
}

// applyLocalNetworkPolicies makes the chart's NetworkPolicies, which a node that sandboxes
// enforces between pods; ones that exist are left as they are, which an admin may have
// changed.
func applyLocalNetworkPolicies(ctx context.Context, c client.Client, namespace string) error {
	for _, p := range builder.LocalNetworkPolicies(namespace) {
		if err := c.Create(ctx, p); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating NetworkPolicy %s: %w", p.Name, err)
		}
	}
	return nil
}
