package apiserver

import (
	"context"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"k8s.io/utils/ptr"

	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
)

// ClusterService keeps the users' ipyparallel clusters (Cluster resources).
type ClusterService interface {
	ListClusters(ctx context.Context, u User) ([]jupyter.Cluster, error)
	GetCluster(ctx context.Context, u User, id string) (jupyter.Cluster, error)
	// StartCluster starts a stopped cluster, with n engines when n is given.
	StartCluster(ctx context.Context, u User, id string, n *int32) (jupyter.Cluster, error)
	StopCluster(ctx context.Context, u User, id string) (jupyter.Cluster, error)
	// CreateCluster makes the user a cluster named req.Profile of req.Framework and starts it
	// with req.N engines (two when nil).
	CreateCluster(ctx context.Context, u User, req jupyter.ClusterCreate) (jupyter.Cluster, error)
	// DeleteCluster deletes the user's cluster, running or not.
	DeleteCluster(ctx context.Context, u User, id string) error
	// Dashboard is the host:port of the HTTP server of the user's own running dask cluster
	// (not-found for anyone else, admins too).
	Dashboard(ctx context.Context, u User, id string) (string, error)
}

// createCluster is POST /api/clusters, nbkube's own: {"profile": ..., "n": ...} makes the
// user a cluster and starts it; 201 with its model.
func (s *Server) createCluster(c *gin.Context) error {
	var body jupyter.ClusterCreate
	if err := readJSON(c, &body); err != nil {
		return err
	}
	if body.Profile == "" {
		return domainerr.Invalid("A new cluster needs a profile (its name)")
	}
	m, err := s.opts.Clusters.CreateCluster(c.Request.Context(), *userOf(c), body)
	if err != nil {
		return err
	}
	c.Header("Location", s.opts.BaseURL+"api/clusters/"+m.Profile)
	c.JSON(http.StatusCreated, s.clusterModel(m))
	return nil
}

// deleteCluster is DELETE /api/clusters/<id>, nbkube's own: the cluster and its pods go.
func (s *Server) deleteCluster(c *gin.Context) error {
	if err := s.opts.Clusters.DeleteCluster(c.Request.Context(), *userOf(c), c.Param("id")); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// listClusters is GET /api/clusters and the older GET /clusters.
func (s *Server) listClusters(c *gin.Context) error {
	list, err := s.opts.Clusters.ListClusters(c.Request.Context(), *userOf(c))
	if err != nil {
		return err
	}
	for i := range list {
		list[i] = s.clusterModel(list[i])
	}
	c.JSON(http.StatusOK, list)
	return nil
}

// getCluster is GET /api/clusters/<id> and the older GET /clusters/<profile>.
func (s *Server) getCluster(c *gin.Context) error {
	m, err := s.opts.Clusters.GetCluster(c.Request.Context(), *userOf(c), c.Param("id"))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, s.clusterModel(m))
	return nil
}

// clusterAction is POST /api/clusters/<id>/{start,stop} and the older
// POST /clusters/<profile>/{start,stop}. A start takes the number of engines as ?n= (as
// IPython's dashboard sent it) or as {"n": ...}. Both answer the cluster's model, 409 when
// the cluster already is as asked.
func (s *Server) clusterAction(c *gin.Context) error {
	ctx, u, id := c.Request.Context(), *userOf(c), c.Param("id")
	var (
		m   jupyter.Cluster
		err error
	)
	switch action := c.Param("action"); action {
	case "start":
		var n *int32
		if n, err = engineCount(c); err != nil {
			return err
		}
		m, err = s.opts.Clusters.StartCluster(ctx, u, id, n)
	case "stop":
		m, err = s.opts.Clusters.StopCluster(ctx, u, id)
	default:
		return domainerr.Invalid("Unknown cluster action: %s", action)
	}
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, s.clusterModel(m))
	return nil
}

// clusterModel is m with the path of a dask cluster's dashboard under this server.
func (s *Server) clusterModel(m jupyter.Cluster) jupyter.Cluster {
	if m.Framework == jupyter.FrameworkDask {
		m.DashboardURL = builder.DaskDashboardPrefix(s.opts.BaseURL, m.Profile) + "/"
	}
	return m
}

// engineCount is a start's n, from the query or the body; nil when neither gives it.
func engineCount(c *gin.Context) (*int32, error) {
	if q := c.Query("n"); q != "" {
		n, err := strconv.ParseInt(q, 10, 32)
		if err != nil {
			return nil, domainerr.Invalid("n must be a number of engines: %q", q)
		}
		return ptr.To(int32(n)), nil
	}
	var body jupyter.ClusterStart
	if err := readJSON(c, &body); err != nil {
		return nil, err
	}
	return body.N, nil
}
