package repository

import (
	"context"
	"net"
	"slices"
	"strconv"

	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch

// Peers finds the other replicas of the API server: the endpoints of its Service that serve.
type Peers struct {
	Reader    client.Reader
	Namespace string
	// Service is the API server's Service.
	Service string
	// Port is the name of the Service's port of the API.
	Port string
	// Self is this replica's address, which is left out.
	Self string
}

// Addresses are the other replicas' host:port, sorted.
func (p *Peers) Addresses(ctx context.Context) ([]string, error) {
	var list discoveryv1.EndpointSliceList
	if err := p.Reader.List(ctx, &list, client.InNamespace(p.Namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: p.Service}); err != nil {
		return nil, err
	}
	var out []string
	for _, s := range list.Items {
		port := int32(0)
		for _, sp := range s.Ports {
			if sp.Name != nil && *sp.Name == p.Port && sp.Port != nil {
				port = *sp.Port
			}
		}
		if port == 0 {
			continue
		}
		for _, e := range s.Endpoints {
			// A replica that is still serving while it goes away keeps its subscribers
			// until then; one that does not serve has none.
			if serving := e.Conditions.Serving; serving != nil && !*serving {
				continue
			}
			if serving, ready := e.Conditions.Serving, e.Conditions.Ready; serving == nil && ready != nil && !*ready {
				continue
			}
			for _, addr := range e.Addresses {
				if addr != p.Self {
					out = append(out, net.JoinHostPort(addr, strconv.Itoa(int(port))))
				}
				break // the addresses of an endpoint are one pod's
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
