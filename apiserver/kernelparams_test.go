package apiserver_test

import (
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// A start chooses the launch parameters its kernel spec declares, within the spec's bounds;
// a gateway's KERNEL_<NAME> variables are parameters too; /api/kernelspecs shows the schema.
func TestStartKernel_LaunchParameters(t *testing.T) {
	c, ns, s, tokens := gatewayEnv(t)
	as := []string{"Authorization", "token " + tokens["gw"]}
	spec := &nbv1.KernelSpec{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sized"},
		Spec: nbv1.KernelSpecSpec{DisplayName: "Sized", Language: "python",
			Argv:     []string{"python3", "-m", "ipykernel_launcher", "-f", "{connection_file}", "--log-level={log_level}"},
			Metadata: &apiextensionsv1.JSON{Raw: []byte(`{"debugger": true}`)},
			Parameters: []nbv1.KernelParameter{
				{Name: "cpus", Type: nbv1.ParameterNumber, Default: "1", Minimum: ptr.To(resource.MustParse("0.5")), Maximum: ptr.To(resource.MustParse("4")),
					Resource: &nbv1.ParameterResource{Name: "cpu"}},
				{Name: "log_level", Type: nbv1.ParameterString, Default: "INFO", Enum: []string{"DEBUG", "INFO"}},
			}}}
	if err := c.Create(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	tooMany := map[string]any{}
	for i := range 33 {
		tooMany[fmt.Sprintf("p%d", i)] = 1
	}
	start := func(body map[string]any) response {
		body["name"] = "sized"
		return s.do("POST", "/api/kernels", body, as...)
	}
	recorded := func(r response) map[string]string { return startedKernel(t, c, ns, r).Spec.Parameters }

	if got := recorded(start(map[string]any{"parameters": map[string]any{"cpus": 2.5, "log_level": "DEBUG"}})); !maps.Equal(got, map[string]string{"cpus": "2.5", "log_level": "DEBUG"}) {
		t.Errorf("parameters recorded %v", got)
	}
	if got := recorded(start(map[string]any{})); len(got) != 0 {
		t.Errorf("a start naming none records %v; the defaults apply when the pod is built", got)
	}
	// A gateway's env: KERNEL_CPUS is cpus; the body's own parameters win over it.
	if got := recorded(start(map[string]any{"env": map[string]string{"KERNEL_CPUS": "3", "KERNEL_LOG_LEVEL": "DEBUG"},
		"parameters": map[string]any{"log_level": "INFO"}})); !maps.Equal(got, map[string]string{"cpus": "3", "log_level": "INFO"}) {
		t.Errorf("from a gateway's env: %v", got)
	}

	for _, tc := range []struct {
		body map[string]any
		msg  string
	}{
		{map[string]any{"parameters": map[string]any{"cpus": 16}}, "cpus: 16 is above the maximum 4"},
		{map[string]any{"parameters": map[string]any{"cores": 2}}, `no parameter "cores"; it has cpus, log_level`},
		{map[string]any{"parameters": map[string]any{"log_level": "TRACE"}}, `"TRACE" is not one of DEBUG, INFO`},
		{map[string]any{"env": map[string]string{"KERNEL_CPUS": "lots"}}, `cpus: "lots" is not a number`},
		{map[string]any{"parameters": []int{1}}, "Invalid JSON"},
		{map[string]any{"parameters": tooMany}, "parameters has 33 values, more than 32"},
	} {
		r := start(tc.body)
		expect(t, r, http.StatusBadRequest)
		if msg, _ := r.json(t)["message"].(string); !strings.Contains(msg, tc.msg) {
			t.Errorf("%v: message %q, want %q", tc.body, msg, tc.msg)
		}
	}
	// A value the spec refuses says so in Jupyter's short reason too.
	if reason := start(map[string]any{"parameters": map[string]any{"cpus": 16}}).json(t)["reason"]; reason != "bad parameter" {
		t.Errorf("reason %v, want \"bad parameter\"", reason)
	}

	r := s.do("GET", "/api/kernelspecs/sized", nil, as...)
	expect(t, r, http.StatusOK)
	metadata, _ := r.json(t)["spec"].(map[string]any)["metadata"].(map[string]any)
	params, _ := metadata["parameters"].(map[string]any)
	cpus, _ := params["properties"].(map[string]any)["cpus"].(map[string]any)
	if params["type"] != "object" || cpus["type"] != "number" || cpus["maximum"] != 4.0 || cpus["default"] != 1.0 {
		t.Errorf("metadata.parameters %v", params)
	}
	if metadata["debugger"] != true {
		t.Errorf("metadata %v: the spec's own metadata is lost beside the parameters", metadata)
	}
}
