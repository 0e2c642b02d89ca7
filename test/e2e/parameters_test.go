package e2e

import (
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// A launch parameter reaches a real kernel: the value a start or a session chooses is in the
// kernel's environment (the spec's env names it "{greeting}"), a value the spec does not allow
// is a 400 that says why, and /api/kernelspecs offers the schema a front end builds its form
// from.
func TestLocal_LaunchParametersReachTheKernel(t *testing.T) {
	inst := startLocal(t, t.TempDir(), t.TempDir())
	spec := &nbv1.KernelSpec{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "greeter"},
		Spec: nbv1.KernelSpecSpec{DisplayName: "Greeter", Language: "python",
			Argv: []string{"/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"},
			Env:  map[string]string{"GREETING": "{greeting}, {name}"},
			Parameters: []nbv1.KernelParameter{
				{Name: "greeting", Type: nbv1.ParameterString, Default: "hello", Enum: []string{"hello", "bonjour"}},
				{Name: "name", Type: nbv1.ParameterString, Default: "world"},
			}}}
	if err := inst.client.Create(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	api := inst.api(t)

	var specs struct {
		KernelSpecs map[string]struct {
			Spec struct {
				Metadata struct {
					Parameters struct {
						Properties map[string]map[string]any `json:"properties"`
					} `json:"parameters"`
				} `json:"metadata"`
			} `json:"spec"`
		} `json:"kernelspecs"`
	}
	api.getJSON(t, "api/kernelspecs", &specs)
	if g := specs.KernelSpecs["greeter"].Spec.Metadata.Parameters.Properties["greeting"]; g["default"] != "hello" || len(g["enum"].([]any)) != 2 {
		t.Errorf("/api/kernelspecs: greeter's parameters %v", specs.KernelSpecs["greeter"].Spec.Metadata.Parameters)
	}

	r := api.call(t, http.MethodPost, "api/kernels", map[string]any{"name": "greeter", "parameters": map[string]any{"greeting": "ciao"}})
	if r.status != http.StatusBadRequest || !strings.Contains(r.jupyterError(t).Message, `"ciao" is not one of hello, bonjour`) {
		t.Errorf("a greeting the spec does not allow: HTTP %d %s", r.status, r.body)
	}

	var k kernelModel
	api.call(t, http.MethodPost, "api/kernels", map[string]any{"name": "greeter", "parameters": map[string]any{"greeting": "bonjour", "name": "{greeting}"}}).
		want(t, http.StatusCreated).decode(t, &k)
	ws := dialJupyterWS(t, api, "api/kernels/"+k.ID+"/channels", "")
	e := runCell(t, ws, "import os; print(os.environ['GREETING'])")
	if got := strings.TrimSpace(e.Stdout.String()); got != "bonjour, {greeting}" {
		t.Errorf("the kernel's GREETING is %q, want the chosen greeting and the name as given", got)
	}

	// A session's kernel takes the parameters of the session's request.
	s := createSession(t, api, map[string]any{"path": "greet.ipynb", "type": "notebook",
		"kernel": map[string]any{"name": "greeter", "parameters": map[string]any{"name": "notebook"}}})
	sws := dialJupyterWS(t, api, "api/kernels/"+s.Kernel.ID+"/channels", s.ID)
	e = runCell(t, sws, "import os; print(os.environ['GREETING'])")
	if got := strings.TrimSpace(e.Stdout.String()); got != "hello, notebook" {
		t.Errorf("the session kernel's GREETING is %q, want the default greeting and the session's name", got)
	}
}
