package repository

import (
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestPeers_AreTheOtherServingEndpointsOfTheService reads EndpointSlices as the API
// server's service account: the other replicas that serve, at the port of the API, and
// neither this one nor another Service's.
func TestPeers_AreTheOtherServingEndpointsOfTheService(t *testing.T) {
	admin, sa, ns, _ := apiServersRole(t)
	endpoint := func(addr string, ready, serving *bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready, Serving: serving}}
	}
	slice := func(name, service string, endpoints ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("metrics"), Port: ptr.To[int32](8443)}, {Name: ptr.To("http"), Port: ptr.To[int32](8888)}},
			Endpoints:   endpoints,
		}
	}
	for _, s := range []*discoveryv1.EndpointSlice{
		slice("nb-a", "nb",
			endpoint("10.0.0.1", ptr.To(true), ptr.To(true)),   // this replica
			endpoint("10.0.0.2", ptr.To(true), ptr.To(true)),   // a peer
			endpoint("10.0.0.3", ptr.To(false), ptr.To(true)),  // a peer on its way out, still serving
			endpoint("10.0.0.4", ptr.To(false), ptr.To(false)), // one that does not serve
			endpoint("10.0.0.5", ptr.To(false), nil),           // nor this one
		),
		slice("nb-b", "nb", endpoint("10.0.0.6", nil, nil)),
		slice("other", "other", endpoint("10.0.0.7", ptr.To(true), ptr.To(true))),
	} {
		if err := admin.Create(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	got, err := (&Peers{Reader: sa, Namespace: ns, Service: "nb", Port: "http", Self: "10.0.0.1"}).Addresses(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"10.0.0.2:8888", "10.0.0.3:8888", "10.0.0.6:8888"}; !slices.Equal(got, want) {
		t.Errorf("peers %v, want %v", got, want)
	}
}
