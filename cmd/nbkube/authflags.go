package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nbkube/nbkube/internal/identity"
)

// authKinds are the identity providers --auth can name.
var authKinds = []string{identity.KindToken, identity.KindUsers, identity.KindKubernetes, identity.KindJupyterHub, identity.KindOIDC}

// authFlags choose the identity providers of the API server.
type authFlags struct {
	kinds        []string
	usersFile    string
	hubAPIURL    string
	hubTokenFile string
	// hubAuthorizeURL and hubClientID make nbkube the Hub's OAuth client for browser logins.
	hubAuthorizeURL, hubClientID string
	oidc                         oidcFlags
	// prefixes go before the names of the users of the providers whose names others choose
	// (kubernetes, jupyterhub, oidc), by kind: docs/users.md, "Names across providers".
	prefixes map[string]*string
}

// prefixFlags name the username prefix flag of each provider that can have one.
var prefixFlags = map[string]string{
	identity.KindKubernetes: "kubernetes-username-prefix",
	identity.KindJupyterHub: "hub-username-prefix",
	identity.KindOIDC:       "oidc-username-prefix",
}

// oidcFlags configure the oidc provider; its client secret is never a flag, so that it shows
// in no process list.
type oidcFlags struct {
	issuer, clientID, secretFile                 string
	usernameClaim, groupsClaim, displayNameClaim string
	scopes, adminGroups, actAsGroups             listFlag
}

// oidcSecretEnv holds the oidc client's secret when no file does.
const oidcSecretEnv = "NBKUBE_OIDC_CLIENT_SECRET"

// listFlag is a comma-separated list.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	*l = nil
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// hubTokenEnv is where a JupyterHub service finds its API token, by the Hub's convention;
// the token is never a flag, so that it does not show in the process list.
const hubTokenEnv = "JUPYTERHUB_API_TOKEN"

func (f *authFlags) bind(fs *flag.FlagSet) {
	f.kinds = []string{identity.KindToken}
	fs.Func("auth", "comma-separated identity `providers`, asked in order: token (the --token), users (--users-file), kubernetes (bearer tokens by TokenReview), jupyterhub (a JupyterHub's API tokens and OAuth login), oidc (OpenID Connect login, --oidc-*) (default token)", func(s string) error {
		kinds, err := parseAuthKinds(s)
		if err != nil {
			return err
		}
		f.kinds = kinds
		return nil
	})
	fs.StringVar(&f.usersFile, "users-file", "", "the users file of --auth=users (YAML; re-read when it changes)")
	fs.StringVar(&f.hubAPIURL, "hub-api-url", os.Getenv("JUPYTERHUB_API_URL"), "the JupyterHub API of --auth=jupyterhub, e.g. http://hub:8081/hub/api (default $JUPYTERHUB_API_URL)")
	fs.StringVar(&f.hubTokenFile, "hub-api-token-file", "", "a file holding nbkube's API token as a JupyterHub service (default: $"+hubTokenEnv+")")
	fs.StringVar(&f.hubAuthorizeURL, "hub-authorize-url", "", "the Hub's OAuth authorization endpoint as browsers reach it, e.g. https://hub.example.org/hub/api/oauth2/authorize (default: --hub-api-url + /oauth2/authorize)")
	fs.StringVar(&f.hubClientID, "hub-oauth-client-id", identity.DefaultJupyterHubOAuthClientID, "nbkube's OAuth client id at the Hub: service-<the service's name>")
	o := &f.oidc
	fs.StringVar(&o.issuer, "oidc-issuer-url", "", "the OpenID provider's issuer of --auth=oidc, exactly as its discovery document says it")
	fs.StringVar(&o.clientID, "oidc-client-id", "", "nbkube's client id at the OpenID provider")
	fs.StringVar(&o.secretFile, "oidc-client-secret-file", "", "a file holding nbkube's client secret at the OpenID provider (default: $"+oidcSecretEnv+"; none: a public client)")
	fs.Var(&o.scopes, "oidc-scopes", "comma-separated scopes to ask for (default: openid and those of profile, email, groups the provider supports)")
	fs.StringVar(&o.usernameClaim, "oidc-username-claim", identity.DefaultUsernameClaim, "the claim that names the user")
	fs.StringVar(&o.groupsClaim, "oidc-groups-claim", identity.DefaultGroupsClaim, "the claim that lists the user's groups")
	fs.StringVar(&o.displayNameClaim, "oidc-display-name-claim", identity.DefaultDisplayNameClaim, "the claim of the user's display name")
	fs.Var(&o.adminGroups, "oidc-admin-groups", "comma-separated groups whose members are admins")
	fs.Var(&o.actAsGroups, "oidc-act-as-groups", "comma-separated groups whose members may act for other users (gateways)")
	f.prefixes = map[string]*string{}
	for kind, name := range prefixFlags {
		f.prefixes[kind] = fs.String(name, "", "a prefix before the names of --auth="+kind+"'s users, e.g. "+kind+": (letters, digits and .-_@+:); "+
			"without it, a "+kind+" user whose name is the token's user's or a users file user's is refused")
	}
}

func parseAuthKinds(s string) ([]string, error) {
	var kinds []string
	for k := range strings.SplitSeq(s, ",") {
		k = strings.TrimSpace(k)
		switch {
		case k == "":
			continue
		case !slices.Contains(authKinds, k):
			return nil, fmt.Errorf("unknown identity provider %q; available: %s", k, strings.Join(authKinds, ", "))
		case slices.Contains(kinds, k):
			return nil, fmt.Errorf("identity provider %q named twice", k)
		}
		kinds = append(kinds, k)
	}
	if len(kinds) == 0 {
		return nil, errors.New("at least one identity provider is needed")
	}
	return kinds, nil
}

func (f *authFlags) has(kind string) bool { return slices.Contains(f.kinds, kind) }

// multiUser tells whether a provider may know users besides the token's.
func (f *authFlags) multiUser() bool {
	return slices.ContainsFunc(f.kinds, func(k string) bool { return k != identity.KindToken })
}

// kubeAuth is the cluster the kubernetes provider asks: its API server reviews tokens, and
// rights are asked for in namespace.
type kubeAuth struct {
	config    *rest.Config
	namespace string
}

// providers builds the providers in --auth's order; the token provider's token proves u.
//
// Names must say one user across providers, since owners are bare names: the users file may
// not name the token's user (it would not start), a user the other providers vouch for under
// the name of one of those is refused when they come, and each of kubernetes, jupyterhub and
// oidc may put its users apart with a prefix.
func (f *authFlags) providers(token string, u identity.User, kube kubeAuth, log logr.Logger) ([]identity.Provider, error) {
	if f.usersFile != "" && !f.has(identity.KindUsers) {
		return nil, errors.New("--users-file is set, but --auth does not name users")
	}
	for kind, prefix := range f.prefixes {
		if *prefix == "" {
			continue
		}
		if !f.has(kind) {
			return nil, fmt.Errorf("--%s is set, but --auth does not name %s", prefixFlags[kind], kind)
		}
		if err := identity.CheckUsernamePrefix(*prefix); err != nil {
			return nil, fmt.Errorf("--%s: %w", prefixFlags[kind], err)
		}
	}
	f.warnSharedNames(log)
	var reserved map[string]string
	if f.has(identity.KindToken) {
		reserved = map[string]string{u.Name: "the token's user (the admin of --token)"}
	}
	var out []identity.Provider
	for _, k := range f.kinds {
		p, err := f.provider(k, token, u, kube, reserved, log)
		if err != nil {
			return nil, err
		}
		if prefix := f.prefixes[k]; prefix != nil {
			p = identity.WithUsernamePrefix(p, *prefix)
		}
		out = append(out, p)
	}
	return out, nil
}

// warnSharedNames warns of providers, among those whose names others choose, that share their
// names: a name both vouch for is one user, which is what an installation whose cluster and
// OpenID provider know the same people means, and what a prefix undoes.
func (f *authFlags) warnSharedNames(log logr.Logger) {
	var shared []string
	for _, k := range f.kinds {
		if p := f.prefixes[k]; p != nil && *p == "" {
			shared = append(shared, k)
		}
	}
	if len(shared) > 1 {
		log.Info("Identity providers share their users' names: a name more than one of them vouches for is one user, owning the same kernels, sessions and files; give all but one a username prefix unless that is meant",
			"providers", shared)
	}
}

// provider builds the provider of kind k; reserved are the names the users file may not have.
func (f *authFlags) provider(k, token string, u identity.User, kube kubeAuth, reserved map[string]string, log logr.Logger) (identity.Provider, error) {
	switch k {
	case identity.KindToken:
		return identity.NewToken(token, u), nil
	case identity.KindUsers:
		if f.usersFile == "" {
			return nil, errors.New("--auth=users needs --users-file")
		}
		return identity.NewUsersFile(f.usersFile, identity.UsersFileOptions{Log: log.WithName("users"), Reserved: reserved})
	case identity.KindJupyterHub:
		return f.jupyterHub()
	case identity.KindOIDC:
		return f.oidc.provider()
	case identity.KindKubernetes:
		if kube.config == nil {
			return nil, errors.New("--auth=kubernetes needs a Kubernetes API server")
		}
		cs, err := kubernetes.NewForConfig(kube.config)
		if err != nil {
			return nil, err
		}
		return identity.NewKubernetes(identity.KubernetesOptions{TokenReviews: cs.AuthenticationV1().TokenReviews(),
			SubjectAccessReviews: cs.AuthorizationV1().SubjectAccessReviews(), Namespace: kube.namespace})
	}
	return nil, fmt.Errorf("unknown identity provider %q", k)
}

// jupyterHub is the provider of --hub-api-url, with the service token of
// --hub-api-token-file or $JUPYTERHUB_API_TOKEN.
func (f *authFlags) jupyterHub() (*identity.JupyterHub, error) {
	if f.hubAPIURL == "" {
		return nil, errors.New("--auth=jupyterhub needs --hub-api-url (or $JUPYTERHUB_API_URL)")
	}
	token := os.Getenv(hubTokenEnv)
	if f.hubTokenFile != "" {
		b, err := os.ReadFile(f.hubTokenFile)
		if err != nil {
			return nil, fmt.Errorf("--hub-api-token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return nil, errors.New("--auth=jupyterhub needs the service's API token in $" + hubTokenEnv + " or --hub-api-token-file")
	}
	return identity.NewJupyterHub(identity.JupyterHubOptions{APIURL: f.hubAPIURL, ServiceToken: token,
		AuthorizeURL: f.hubAuthorizeURL, OAuthClientID: f.hubClientID})
}

// provider is the OpenID provider of --oidc-issuer-url, whose discovery document it reads now:
// nbkube does not start against a provider it cannot reach.
func (o *oidcFlags) provider() (*identity.OIDC, error) {
	if o.issuer == "" || o.clientID == "" {
		return nil, errors.New("--auth=oidc needs --oidc-issuer-url and --oidc-client-id")
	}
	secret := os.Getenv(oidcSecretEnv)
	if o.secretFile != "" {
		b, err := os.ReadFile(o.secretFile)
		if err != nil {
			return nil, fmt.Errorf("--oidc-client-secret-file: %w", err)
		}
		secret = strings.TrimSpace(string(b))
	}
	return identity.NewOIDC(context.Background(), identity.OIDCOptions{
		IssuerURL: o.issuer, ClientID: o.clientID, ClientSecret: secret, Scopes: o.scopes,
		UsernameClaim: o.usernameClaim, GroupsClaim: o.groupsClaim, DisplayNameClaim: o.displayNameClaim,
		AdminGroups: o.adminGroups, ActAsGroups: o.actAsGroups,
	})
}
