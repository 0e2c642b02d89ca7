package repository

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/quota"
)

// MaxClusterEngines is the most engines a start may ask for, the Cluster schema's maximum.
const MaxClusterEngines = 1024

// Clusters are the users' ipyparallel clusters (Cluster resources), which admins make with
// kubectl and users make through the API, and which users start, stop and delete.
type Clusters struct {
	Reader    client.Reader
	Writer    client.Writer
	Namespace string
	// Quota reserves room for a cluster's engines in its owner's ledger before it starts,
	// and refuses a start past a limit (403); none when nil.
	Quota *quota.Ledger
	// APITimeout bounds each write of a start or stop to the Kubernetes API, as
	// Kernels.APITimeout does (DefaultAPITimeout when zero).
	APITimeout time.Duration
}

func (r *Clusters) apiTimeout() time.Duration {
	if r.APITimeout > 0 {
		return r.APITimeout
	}
	return DefaultAPITimeout
}

// +kubebuilder:rbac:groups=nbkube.io,resources=clusters,verbs=get;list;watch;create;update;patch;delete

// ListClusters lists the user's clusters (every cluster for an admin).
func (r *Clusters) ListClusters(ctx context.Context, u identity.User) ([]jupyter.Cluster, error) {
	list, err := ownedClusters.list(ctx, r.Reader, r.Namespace, u)
	if err != nil {
		return nil, err
	}
	out := make([]jupyter.Cluster, 0, len(list))
	for _, c := range list {
		out = append(out, ClusterModel(c))
	}
	return out, nil
}

// GetCluster is the user's cluster.
func (r *Clusters) GetCluster(ctx context.Context, u identity.User, id string) (jupyter.Cluster, error) {
	c, err := r.get(ctx, u, id)
	if err != nil {
		return jupyter.Cluster{}, err
	}
	return ClusterModel(c), nil
}

// StartCluster starts a stopped cluster, with n engines when n is given; a running one is a
// conflict, as IPython answered.
func (r *Clusters) StartCluster(ctx context.Context, u identity.User, id string, n *int32) (jupyter.Cluster, error) {
	if n != nil && (*n < 0 || *n > MaxClusterEngines) {
		return jupyter.Cluster{}, domainerr.Invalid("n must be between 0 and %d", MaxClusterEngines)
	}
	var owner string
	m, err := r.change(ctx, u, id, func(c *nbv1.Cluster) error {
		if c.Spec.State != nbv1.ClusterStopped {
			return domainerr.Conflict("Cluster already running with profile: %s", id)
		}
		c.Spec.State = nbv1.ClusterRunning
		if n != nil {
			c.Spec.Engines = *n
		}
		owner = string(c.Spec.Owner)
		if r.Quota == nil {
			return nil
		}
		room := quota.ClusterRoom(c.Name, c.Spec.Engines, c.Spec.EngineResources)
		return boundedCall(ctx, r.apiTimeout(), "record the cluster in its owner's usage", func(ctx context.Context) error {
			_, _, err := r.Quota.Reserve(ctx, quota.Request{Owner: owner, Groups: groupsOf(u, owner), Reservation: room})
			return quota.Refusal(err)
		})
	})
	if err != nil && owner != "" && !errors.Is(err, domainerr.ErrForbidden) {
		// Not started after all.
		r.release(ctx, owner, id)
	}
	return m, err
}

// MaxOwnClusters is the most clusters one user may have made through the API: a stopped
// cluster holds no engines, so the quota does not bound them, and each is objects in the
// control plane. Clusters admins make with kubectl are not bounded.
const MaxOwnClusters = 20

// DefaultClusterEngines is a new cluster's engines when the request names none, the Cluster
// schema's default.
const DefaultClusterEngines = 2

// clusterProfile is the form of a profile a user may name a new cluster: a DNS label short
// enough that the names of its objects (the "-ipcontroller" Service, the "-ipengine-" pods)
// still are.
var clusterProfile = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$`)

// CreateCluster makes a cluster of u's named req.Profile, of req.Framework (ipyparallel when
// empty), and starts it with req.N engines (DefaultClusterEngines when nil), its room reserved
// in u's usage first as a start's is. A name another cluster has, u's or anyone's, is a
// conflict.
func (r *Clusters) CreateCluster(ctx context.Context, u identity.User, req jupyter.ClusterCreate) (jupyter.Cluster, error) {
	profile, n := req.Profile, req.N
	framework := nbv1.ClusterFramework(req.Framework)
	switch framework {
	case "":
		framework = nbv1.FrameworkIPyParallel
	case nbv1.FrameworkIPyParallel, nbv1.FrameworkDask:
	default:
		return jupyter.Cluster{}, domainerr.Invalid("Unknown framework %q: a cluster runs %q or %q", req.Framework, nbv1.FrameworkIPyParallel, nbv1.FrameworkDask)
	}
	if !clusterProfile.MatchString(profile) {
		return jupyter.Cluster{}, domainerr.Invalid("Invalid profile %q: a cluster's name is 1 to 40 lowercase letters, digits and '-', starting and ending with a letter or digit", profile)
	}
	engines := int32(DefaultClusterEngines)
	if n != nil {
		engines = *n
	}
	if engines < 0 || engines > MaxClusterEngines {
		return jupyter.Cluster{}, domainerr.Invalid("n must be between 0 and %d", MaxClusterEngines)
	}
	if err := r.checkRoomForOneMore(ctx, u); err != nil {
		return jupyter.Cluster{}, err
	}
	c := &nbv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{
			Name: profile, Namespace: r.Namespace,
			Labels: map[string]string{nbv1.LabelManagedBy: nbv1.ManagedByValue},
		},
		Spec: nbv1.ClusterParameters{Owner: nbv1.Owner(u.Name), Framework: framework, State: nbv1.ClusterRunning, Engines: engines},
	}
	if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(c), &nbv1.Cluster{}); err == nil {
		return jupyter.Cluster{}, errClusterNameTaken(profile)
	} else if !apierrors.IsNotFound(err) {
		return jupyter.Cluster{}, fmt.Errorf("get cluster: %w", err)
	}
	if r.Quota != nil {
		room := quota.ClusterRoom(profile, engines, c.Spec.EngineResources)
		if err := boundedCall(ctx, r.apiTimeout(), "record the cluster in its owner's usage", func(ctx context.Context) error {
			_, _, err := r.Quota.Reserve(ctx, quota.Request{Owner: u.Name, Groups: groupsOf(u, u.Name), Reservation: room})
			return quota.Refusal(err)
		}); err != nil {
			return jupyter.Cluster{}, err
		}
	}
	err := boundedCall(ctx, r.apiTimeout(), "create the cluster", func(ctx context.Context) error { return r.Writer.Create(ctx, c) })
	if err != nil && !r.madeMeanwhileBy(ctx, u, profile, err) {
		// Not made: give the room back.
		r.release(ctx, u.Name, profile)
	}
	switch {
	case err == nil:
	case apierrors.IsAlreadyExists(err):
		return jupyter.Cluster{}, errClusterNameTaken(profile)
	case apierrors.IsInvalid(err):
		return jupyter.Cluster{}, domainerr.Invalid("%s", err.Error())
	case errors.Is(err, domainerr.ErrUnavailable):
		return jupyter.Cluster{}, err
	default:
		return jupyter.Cluster{}, fmt.Errorf("create cluster: %w", err)
	}
	waitFresh(ctx, r.Reader, c)
	return ClusterModel(c), nil
}

// madeMeanwhileBy tells whether a create failed because u made a cluster of that name
// meanwhile (another request, through any replica): the room reserved is that one's too.
func (r *Clusters) madeMeanwhileBy(ctx context.Context, u identity.User, profile string, err error) bool {
	if !apierrors.IsAlreadyExists(err) {
		return false
	}
	c := &nbv1.Cluster{}
	return r.Reader.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: profile}, c) == nil &&
		string(c.Spec.Owner) == u.Name
}

// checkRoomForOneMore refuses a new cluster to a user who has MaxOwnClusters already.
func (r *Clusters) checkRoomForOneMore(ctx context.Context, u identity.User) error {
	var l nbv1.ClusterList
	if err := r.Reader.List(ctx, &l, client.InNamespace(r.Namespace)); err != nil {
		return fmt.Errorf("list clusters: %w", err)
	}
	mine := 0
	for i := range l.Items {
		if string(l.Items[i].Spec.Owner) == u.Name {
			mine++
		}
	}
	if mine >= MaxOwnClusters {
		return domainerr.Forbidden("You have %d clusters, the most one user may make: delete one first", mine)
	}
	return nil
}

func errClusterNameTaken(profile string) error {
	return domainerr.Conflict("The cluster name %s is not available: choose another", profile)
}

// DeleteCluster deletes the user's cluster, running or not; its pods go with it.
func (r *Clusters) DeleteCluster(ctx context.Context, u identity.User, id string) error {
	c, err := r.get(ctx, u, id)
	if err != nil {
		return err
	}
	err = boundedCall(ctx, r.apiTimeout(), "delete the cluster", func(ctx context.Context) error {
		return r.Writer.Delete(ctx, c, client.Preconditions{UID: &c.UID})
	})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone meanwhile, or another of that name: not this request's to delete.
		return ownedClusters.missing(id)
	case errors.Is(err, domainerr.ErrUnavailable):
		return err
	case err != nil:
		return fmt.Errorf("delete cluster: %w", err)
	}
	r.release(ctx, string(c.Spec.Owner), id)
	waitGone(ctx, r.Reader, c)
	return nil
}

// release gives back the room of a cluster's engines.
func (r *Clusters) release(ctx context.Context, owner, id string) {
	if r.Quota == nil {
		return
	}
	if err := r.Quota.Release(context.WithoutCancel(ctx), owner, nbv1.ReservationCluster, id); err != nil {
		// The usage controller frees it once it sees the cluster stopped.
		log.FromContext(ctx).Error(err, "Releasing a cluster's room failed", "cluster", id, "owner", owner)
	}
}

// StopCluster stops a running cluster; a stopped one is a conflict, as IPython answered.
func (r *Clusters) StopCluster(ctx context.Context, u identity.User, id string) (jupyter.Cluster, error) {
	m, err := r.change(ctx, u, id, func(c *nbv1.Cluster) error {
		if c.Spec.State == nbv1.ClusterStopped {
			return domainerr.Conflict("Cluster not running with profile: %s", id)
		}
		c.Spec.State = nbv1.ClusterStopped
		return nil
	})
	if err == nil {
		r.release(ctx, m.Owner, id)
	}
	return m, err
}

// change applies mutate to the cluster, again on a conflict with the controller's writes,
// and waits until the cache shows it, so that a GET right after does.
func (r *Clusters) change(ctx context.Context, u identity.User, id string, mutate func(*nbv1.Cluster) error) (jupyter.Cluster, error) {
	var c *nbv1.Cluster
	err := retryOnConflict(func() error {
		cur, err := r.get(ctx, u, id)
		if err != nil {
			return err
		}
		c = cur.DeepCopy()
		if err := mutate(c); err != nil {
			return err
		}
		return boundedCall(ctx, r.apiTimeout(), "change the cluster", func(ctx context.Context) error { return r.Writer.Update(ctx, c) })
	})
	switch {
	case apierrors.IsInvalid(err):
		return jupyter.Cluster{}, domainerr.Invalid("%s", err.Error())
	case errors.Is(err, domainerr.ErrNotFound), errors.Is(err, domainerr.ErrConflict), errors.Is(err, domainerr.ErrForbidden),
		errors.Is(err, domainerr.ErrUnavailable):
		return jupyter.Cluster{}, err
	case err != nil:
		return jupyter.Cluster{}, fmt.Errorf("update cluster: %w", err)
	}
	waitFresh(ctx, r.Reader, c)
	return ClusterModel(c), nil
}

func (r *Clusters) get(ctx context.Context, u identity.User, id string) (*nbv1.Cluster, error) {
	return ownedClusters.get(ctx, r.Reader, r.Namespace, u, id)
}

// Dashboard is the address (host:port) of the HTTP server of u's own running dask cluster
// id, to which the API server proxies its dashboard. Only the owner is shown it, admins not
// either: its pages come from the owner's image, which could serve a script to whoever opens
// them in this server's origin. Anyone else, and any cluster that is not a dask one, gets
// the 404 of a cluster that does not exist; one that does not run yet gets 503.
func (r *Clusters) Dashboard(ctx context.Context, u identity.User, id string) (string, error) {
	c := &nbv1.Cluster{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: id}, c); apierrors.IsNotFound(err) {
		return "", ownedClusters.missing(id)
	} else if err != nil {
		return "", fmt.Errorf("get cluster: %w", err)
	}
	if string(c.Spec.Owner) != u.Name || !c.IsDask() {
		return "", ownedClusters.missing(id)
	}
	if c.Spec.State == nbv1.ClusterStopped || c.Status.DashboardAddress == "" {
		return "", domainerr.Unavailable("The cluster %s has no scheduler running: start it, or wait for it to start", id)
	}
	return c.Status.DashboardAddress, nil
}

// checkCluster tells whether the user may attach a kernel to the cluster named id.
func checkCluster(ctx context.Context, reader client.Reader, namespace string, u identity.User, id string) error {
	if _, err := ownedClusters.get(ctx, reader, namespace, u, id); errors.Is(err, domainerr.ErrNotFound) {
		return domainerr.Invalid("No such cluster: %s", id)
	} else if err != nil {
		return err
	}
	return nil
}

// ClusterModel is the cluster's model in the cluster API.
func ClusterModel(c *nbv1.Cluster) jupyter.Cluster {
	m := jupyter.Cluster{
		Profile:         c.Name,
		ProfileDir:      "~/.ipython/profile_" + c.Name,
		Status:          "running",
		N:               c.Spec.Engines,
		ClusterID:       c.Name,
		Owner:           string(c.Spec.Owner),
		EnginesReady:    c.Status.ReadyEngines,
		EnginesBusy:     c.Status.BusyEngines,
		ControllerReady: meta.IsStatusConditionTrue(c.Status.Conditions, nbv1.ConditionControllerReady),
		Ready:           meta.IsStatusConditionTrue(c.Status.Conditions, nbv1.ConditionReady),
		Framework:       string(cmp.Or(c.Spec.Framework, nbv1.FrameworkIPyParallel)),
	}
	if c.IsDask() {
		m.ProfileDir = ""
		m.Tasks = ptr.To(c.Status.Tasks)
	}
	if c.Spec.State == nbv1.ClusterStopped {
		m.Status = "stopped"
		m.EnginesReady, m.EnginesBusy, m.ControllerReady, m.Ready = 0, 0, false, false
		if m.Tasks != nil {
			m.Tasks = ptr.To[int64](0)
		}
	}
	if t := c.Status.LastActivity; t != nil {
		s := t.UTC().Format(time.RFC3339Nano)
		m.LastActivity = &s
	}
	if f := meta.FindStatusCondition(c.Status.Conditions, nbv1.ConditionFailed); f != nil && f.Status == "True" {
		m.Reason, m.Message = f.Reason, f.Message
	}
	return m
}
