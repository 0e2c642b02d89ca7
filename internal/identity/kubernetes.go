package identity

import (
	"context"
	"fmt"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authzv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/utils/clock"
)

// KindKubernetes is the provider of Kubernetes bearer tokens.
const KindKubernetes = "kubernetes"

// The rights a SubjectAccessReview grants, in nbkube's namespace: deleting Kernels makes an
// admin, and the verb "impersonate" on nbkube.io's "users" (a resource that exists for RBAC
// only, as Kubernetes' own impersonation names users) lets a gateway act for other users.
const (
	ActAsVerb     = "impersonate"
	ActAsGroup    = "nbkube.io"
	ActAsResource = "users"
)

// Defaults of a Kubernetes provider.
const (
	// DefaultKubernetesTimeout bounds each review.
	DefaultKubernetesTimeout = 10 * time.Second
	// DefaultKubernetesRemember is how long the last token a user presented is kept to
	// re-validate their logins with.
	DefaultKubernetesRemember = 24 * time.Hour
	defaultKubernetesUsers    = 4096
)

const serviceAccountPrefix = "system:serviceaccount:"

// KubernetesOptions configure a Kubernetes provider. TokenReviews and SubjectAccessReviews
// come from a clientset: cs.AuthenticationV1().TokenReviews() and
// cs.AuthorizationV1().SubjectAccessReviews().
type KubernetesOptions struct {
	TokenReviews         authnv1client.TokenReviewInterface
	SubjectAccessReviews authzv1client.SubjectAccessReviewInterface
	// Namespace is nbkube's: the rights are asked for there.
	Namespace string
	// Timeout bounds each call; DefaultKubernetesTimeout when zero.
	Timeout time.Duration
	// Remember is how long a user's last token is kept for Lookup;
	// DefaultKubernetesRemember when zero.
	Remember time.Duration
	// Clock is the real clock when nil.
	Clock clock.PassiveClock
}

// Kubernetes is the provider of the Kubernetes API server's bearer tokens: service account
// tokens and whatever else the cluster authenticates. A TokenReview tells the user and their
// groups; SubjectAccessReviews tell their rights.
//
// A user cannot be looked up by name in Kubernetes, so Lookup re-reviews the last token the
// user presented to this process, kept in memory only and only while it stays good: a login
// (cookie, open WebSocket) lives as long as the process holds a good token of its user, and
// ends within the cache's TTL of that token's revocation (a deleted service account, an
// expired token). The credential fingerprint is the user's UID, which all tokens of one
// service account share and a re-created service account does not.
type Kubernetes struct {
	o KubernetesOptions
	// last holds each recent user's last good token, for Lookup.
	last *lastTokens
}

// NewKubernetes is the provider asking the API server of those clients.
func NewKubernetes(o KubernetesOptions) (*Kubernetes, error) {
	if o.TokenReviews == nil || o.SubjectAccessReviews == nil || o.Namespace == "" {
		return nil, fmt.Errorf("the kubernetes identity provider needs TokenReviews, SubjectAccessReviews and a namespace")
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultKubernetesTimeout
	}
	if o.Remember <= 0 {
		o.Remember = DefaultKubernetesRemember
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	p := &Kubernetes{o: o}
	p.last = newLastTokens(defaultKubernetesUsers, o.Remember, o.Clock, p.review)
	return p, nil
}

// Kind is "kubernetes".
func (*Kubernetes) Kind() string { return KindKubernetes }

// AuthenticateToken reviews the token with the API server's own audiences.
func (p *Kubernetes) AuthenticateToken(ctx context.Context, token string) (*User, error) {
	return p.last.authenticate(ctx, token)
}

// Lookup re-reviews the user's last token; nil when this process holds none, or it is no
// longer good.
func (p *Kubernetes) Lookup(ctx context.Context, name string) (*User, error) {
	return p.last.lookup(ctx, name)
}

// review is the token's user with their rights; nil when the API server does not accept it.
func (p *Kubernetes) review(ctx context.Context, token string) (*User, error) {
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	tr, err := p.o.TokenReviews.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("%w: token review: %w", ErrUnavailable, err)
	}
	if !tr.Status.Authenticated || tr.Status.User.Username == "" {
		return nil, nil
	}
	info := tr.Status.User
	u := &User{Name: info.Username, Groups: append([]string(nil), info.Groups...), Provider: KindKubernetes,
		Credential: Fingerprint(KindKubernetes, info.Username, info.UID)}
	if rest, ok := strings.CutPrefix(info.Username, serviceAccountPrefix); ok {
		u.DisplayName = rest[strings.LastIndexByte(rest, ':')+1:]
	}
	if u.Admin, err = p.allowed(ctx, info, authzv1.ResourceAttributes{Verb: "delete", Group: "nbkube.io", Resource: "kernels"}); err != nil {
		return nil, err
	}
	if u.ActAs, err = p.allowed(ctx, info, authzv1.ResourceAttributes{Verb: ActAsVerb, Group: ActAsGroup, Resource: ActAsResource}); err != nil {
		return nil, err
	}
	return u, nil
}

// allowed asks whether the user may do what attrs say in nbkube's namespace.
func (p *Kubernetes) allowed(ctx context.Context, info authnv1.UserInfo, attrs authzv1.ResourceAttributes) (bool, error) {
	attrs.Namespace = p.o.Namespace
	extra := make(map[string]authzv1.ExtraValue, len(info.Extra))
	for k, v := range info.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar, err := p.o.SubjectAccessReviews.Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: info.Username, UID: info.UID, Groups: info.Groups, Extra: extra, ResourceAttributes: &attrs,
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("%w: subject access review: %w", ErrUnavailable, err)
	}
	return sar.Status.Allowed, nil
}
