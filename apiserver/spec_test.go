package apiserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	openapiv3 "github.com/google/gnostic-models/openapiv3"
	"github.com/santhosh-tekuri/jsonschema/v6"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/repository"
	"github.com/nbkube/nbkube/internal/testenv"
)

// specFile is the OpenAPI document GET /api/spec.yaml serves.
const specFile = "spec.yaml"

// specExclusions are the routes deliberately left out of spec.yaml, with why.
var specExclusions = map[string]string{}

// loadSpec reads spec.yaml as JSON values.
func loadSpec(t *testing.T) ([]byte, map[string]any) {
	t.Helper()
	raw, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	data, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("%s: %v", specFile, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return raw, doc
}

// httpMethods are the operations of an OpenAPI path item that Gin can route.
var httpMethods = []string{"get", "put", "post", "delete", "patch", "head", "options"}

// specOperation is one operation of the document: an upper-case method and a path template.
type specOperation struct{ method, path string }

func (o specOperation) String() string { return o.method + " " + o.path }

func specOperations(doc map[string]any) []specOperation {
	var ops []specOperation
	for path, item := range doc["paths"].(map[string]any) {
		for _, m := range httpMethods {
			if _, ok := item.(map[string]any)[m]; ok {
				ops = append(ops, specOperation{strings.ToUpper(m), path})
			}
		}
	}
	return ops
}

// serves tells whether Gin's route pattern (":x" one segment, "*x" the rest) serves the
// document's path template ("{x}" a segment of any value): a route's parameter serves any
// value, a template's parameter only a route's parameter.
func serves(route, template string) bool {
	r := strings.Split(strings.Trim(route, "/"), "/")
	p := strings.Split(strings.Trim(template, "/"), "/")
	for i, seg := range r {
		if strings.HasPrefix(seg, "*") {
			return len(p) > i
		}
		if i >= len(p) {
			return false
		}
		param := strings.HasPrefix(p[i], "{")
		if !strings.HasPrefix(seg, ":") && (param || seg != p[i]) {
			return false
		}
	}
	return len(r) == len(p)
}

func specServer(t *testing.T, opts ...serverOption) *gin.Engine {
	t.Helper()
	h := newHandler(t, t.TempDir(), opts...)
	e, ok := h.(*gin.Engine)
	if !ok {
		t.Fatalf("the handler is a %T, not Gin's engine", h)
	}
	return e
}

// TestSpec_DescribesEveryRouteAndOnlyThem fails when a route is added without its
// description, or the description keeps a path that nothing serves any more.
func TestSpec_DescribesEveryRouteAndOnlyThem(t *testing.T) {
	_, doc := loadSpec(t)
	ops := specOperations(doc)
	routes := specServer(t).Routes()
	excluded := map[string]bool{}
	for _, r := range routes {
		key := r.Method + " " + r.Path
		if _, ok := specExclusions[key]; ok {
			excluded[key] = true
			continue
		}
		if !slices.ContainsFunc(ops, func(o specOperation) bool { return o.method == r.Method && serves(r.Path, o.path) }) {
			t.Errorf("route %s is not in apiserver/%s: describe it there (its parameters, answers and "+
				"error bodies, as the other paths are), or add it to specExclusions in spec_test.go with "+
				"the reason it is left out", key, specFile)
		}
	}
	for key := range specExclusions {
		if !excluded[key] {
			t.Errorf("specExclusions lists %s, which is not a route: take it out", key)
		}
	}
	for _, o := range ops {
		if !slices.ContainsFunc(routes, func(r gin.RouteInfo) bool { return r.Method == o.method && serves(r.Path, o.path) }) {
			t.Errorf("apiserver/%s describes %s, which no route serves: take it out of the document, or add the route in routes.go", specFile, o)
		}
	}
}

func TestSpec_IsAWellFormedOpenAPI3Document(t *testing.T) {
	raw, doc := loadSpec(t)
	// gnostic checks the document against OpenAPI 3.0's structure: required fields, the
	// type of each, and no field the specification does not define.
	if _, err := openapiv3.ParseDocument(raw); err != nil {
		t.Fatalf("not an OpenAPI 3 document: %v", err)
	}
	if v := doc["info"].(map[string]any)["version"]; v != apiserver.APIVersion {
		t.Errorf("info.version %v, but GET /api reports %s", v, apiserver.APIVersion)
	}
	// What gnostic does not check: that references lead somewhere, that each path's
	// parameters are declared, operation ids are unique, and every authenticated operation
	// says how it refuses.
	walk(doc, func(m map[string]any) {
		if ref, ok := m["$ref"].(string); ok {
			if _, err := resolve(doc, ref); err != nil {
				t.Error(err)
			}
		}
	})
	ids := map[string]string{}
	templateParam := regexp.MustCompile(`\{([^}]+)\}`)
	for _, o := range specOperations(doc) {
		item := doc["paths"].(map[string]any)[o.path].(map[string]any)
		op := item[strings.ToLower(o.method)].(map[string]any)
		if id, _ := op["operationId"].(string); id == "" {
			t.Errorf("%s has no operationId", o)
		} else if other, dup := ids[id]; dup {
			t.Errorf("%s and %s share the operationId %s", o, other, id)
		} else {
			ids[id] = o.String()
		}
		declared := map[string]bool{}
		for _, params := range []any{item["parameters"], op["parameters"]} {
			list, _ := params.([]any)
			for _, p := range list {
				p, err := resolve(doc, p)
				if err != nil {
					continue
				}
				if p["in"] == "path" {
					declared[p["name"].(string)] = true
				}
			}
		}
		var inTemplate []string
		for _, m := range templateParam.FindAllStringSubmatch(o.path, -1) {
			inTemplate = append(inTemplate, m[1])
			if !declared[m[1]] {
				t.Errorf("%s: path parameter %s is not declared", o, m[1])
			}
		}
		for name := range declared {
			if !slices.Contains(inTemplate, name) {
				t.Errorf("%s declares path parameter %s that its path lacks", o, name)
			}
		}
		responses, _ := op["responses"].(map[string]any)
		if sec, ok := op["security"].([]any); (!ok || len(sec) > 0) && responses["403"] == nil {
			t.Errorf("%s needs the token but does not describe its 403", o)
		}
	}
}

// walk calls f on every object of the document.
func walk(v any, f func(map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		f(v)
		for _, e := range v {
			walk(e, f)
		}
	case []any:
		for _, e := range v {
			walk(e, f)
		}
	}
}

// resolve follows v when it is a reference ({"$ref": "#/..."}) and returns the object.
func resolve(doc map[string]any, v any) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		if ref, isRef := v.(string); isRef {
			m = map[string]any{"$ref": ref}
		} else {
			return nil, fmt.Errorf("%v is not an object", v)
		}
	}
	ref, ok := m["$ref"].(string)
	if !ok {
		return m, nil
	}
	if !strings.HasPrefix(ref, "#/") {
		return nil, fmt.Errorf("reference %s is not within the document", ref)
	}
	var cur any = doc
	for _, tok := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		obj, ok := cur.(map[string]any)
		if !ok || obj[tok] == nil {
			return nil, fmt.Errorf("reference %s leads nowhere", ref)
		}
		cur = obj[tok]
	}
	return resolve(doc, cur)
}

func TestSpec_IsServedAsJupyterServes(t *testing.T) {
	raw, _ := loadSpec(t)
	s := newServer(t)
	r := s.do("GET", "/api/spec.yaml", nil)
	expect(t, r, http.StatusOK)
	// Jupyter Server's APISpecHandler: the file as is, as text/x-yaml.
	if ct := r.header.Get("Content-Type"); ct != "text/x-yaml" {
		t.Errorf("Content-Type %q, want text/x-yaml", ct)
	}
	if !bytes.Equal(r.body, raw) {
		t.Errorf("served %d bytes, not %s's %d", len(r.body), specFile, len(raw))
	}
	if etag := r.header.Get("Etag"); etag == "" {
		t.Error("no Etag")
	} else if again := s.do("GET", "/api/spec.yaml", nil, "If-None-Match", etag); again.status != http.StatusNotModified {
		t.Errorf("If-None-Match with its Etag: %d, want 304", again.status)
	}
	// Authenticated, as in Jupyter Server.
	expect(t, s.do("GET", "/api/spec.yaml", nil, "Authorization", ""), http.StatusForbidden)
}

// specSchemas compiles the document's answer schemas for checking bodies strictly: OpenAPI
// 3.0's nullable becomes a JSON Schema null type, and an object schema that lists its
// properties allows no others, so that a field the server sends and the document does not
// describe fails the check (the served document leaves them open, for clients' sake).
type specSchemas struct {
	t        *testing.T
	doc      map[string]any
	compiler *jsonschema.Compiler
}

func newSpecSchemas(t *testing.T, doc map[string]any) *specSchemas {
	t.Helper()
	strict := convertForJSONSchema(doc).(map[string]any)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	c.AssertFormat()
	if err := c.AddResource("file:///spec.json", strict); err != nil {
		t.Fatal(err)
	}
	return &specSchemas{t: t, doc: doc, compiler: c}
}

func convertForJSONSchema(v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = convertForJSONSchema(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = convertForJSONSchema(e)
		}
		if _, ok := out["properties"].(map[string]any); ok && out["additionalProperties"] == nil {
			out["additionalProperties"] = false
		}
		if out["nullable"] == true {
			delete(out, "nullable")
			if typ, ok := out["type"].(string); ok {
				out["type"] = []any{typ, "null"}
			} else {
				return map[string]any{"anyOf": []any{out, map[string]any{"type": "null"}}}
			}
		}
		return out
	}
	return v
}

// check checks an answer against the document's operation at path: the status must be one
// it describes, and a JSON body must match its schema.
func (s *specSchemas) check(method, path string, r response) {
	s.t.Helper()
	what := fmt.Sprintf("%s %s answered %d", method, path, r.status)
	item, ok := s.doc["paths"].(map[string]any)[path].(map[string]any)
	if !ok {
		s.t.Errorf("%s: the document has no path %s", what, path)
		return
	}
	op, ok := item[strings.ToLower(method)].(map[string]any)
	if !ok {
		s.t.Errorf("%s: the document has no %s operation there", what, method)
		return
	}
	status := strconv.Itoa(r.status)
	answer, ok := op["responses"].(map[string]any)[status]
	if !ok {
		s.t.Errorf("%s: the document does not describe that status", what)
		return
	}
	pointer := "/paths/" + escapePointer(path) + "/" + strings.ToLower(method) + "/responses/" + status
	if m, _ := answer.(map[string]any); m != nil {
		if ref, ok := m["$ref"].(string); ok {
			pointer = strings.TrimPrefix(ref, "#")
			answer, _ = resolve(s.doc, m)
		}
	}
	content, _ := answer.(map[string]any)["content"].(map[string]any)
	ct := r.header.Get("Content-Type")
	if !strings.HasPrefix(ct, "application/json") {
		if len(content) > 0 && len(r.body) > 0 && !slices.ContainsFunc(mapKeys(content), func(k string) bool { return k == "*/*" || strings.HasPrefix(ct, k) }) {
			s.t.Errorf("%s with Content-Type %s, which the document does not list", what, ct)
		}
		return
	}
	if _, ok := content["application/json"]; !ok {
		s.t.Errorf("%s with a JSON body, which the document does not describe", what)
		return
	}
	sch, err := s.compiler.Compile("file:///spec.json#" + pointer + "/content/application~1json/schema")
	if err != nil {
		s.t.Fatalf("%s: compile its schema: %v", what, err)
	}
	body, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.body))
	if err != nil {
		s.t.Errorf("%s: body %q is not JSON: %v", what, r.body, err)
		return
	}
	if err := sch.Validate(body); err != nil {
		s.t.Errorf("%s: the body does not match the document: %v\nbody: %s", what, err, r.body)
	}
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

func mapKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// TestSpec_TheServersAnswersMatchIt makes real requests to a server over a real contents
// store and real resources, and checks every answer against the document.
func TestSpec_TheServersAnswersMatchIt(t *testing.T) {
	_, doc := loadSpec(t)
	schemas := newSpecSchemas(t, doc)
	c := testenv.KubeClient(t)
	ns := testenv.Namespace(t, c)
	ctx := t.Context()
	for _, o := range []client.Object{
		&nbv1.KernelSpec{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "python3"}, Spec: nbv1.KernelSpecSpec{
			DisplayName: "Python 3", Language: "python", Argv: []string{"python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"}}},
		&nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "k1"}, Spec: nbv1.KernelParameters{Owner: "alice", KernelSpec: "python3"}},
		&nbv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s1"}, Spec: nbv1.SessionParameters{
			Owner: "alice", Path: "n.ipynb", Name: "n.ipynb", Type: "notebook", Kernel: nbv1.SessionKernel{Name: "k1"}}},
		&nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"}, Spec: nbv1.ClusterParameters{Owner: "alice", State: nbv1.ClusterStopped, Engines: 2}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	specs := &repository.KernelSpecs{Reader: c, Namespace: ns}
	kernels := &repository.Kernels{Reader: c, Writer: c, Namespace: ns, Specs: specs}
	s := newServer(t, func(o *apiserver.Options) {
		o.Kernels = kernels
		o.Sessions = &repository.Sessions{Reader: c, Writer: c, Namespace: ns, Kernels: kernels}
		o.Clusters = &repository.Clusters{Reader: c, Writer: c, Namespace: ns}
		o.KernelSpecs = specs
	})
	notebook := map[string]any{"type": "notebook", "content": map[string]any{
		"cells": []any{}, "metadata": map[string]any{}, "nbformat": 4, "nbformat_minor": 5}}
	var notebookID, checkpointID string
	for _, step := range []struct {
		method, url, path string
		body              any
		headers           []string
		after             func(response)
	}{
		{method: "GET", url: "/api", path: "/api", headers: []string{"Authorization", ""}},
		{method: "GET", url: "/api/status", path: "/api/status"},
		{method: "GET", url: "/api/status", path: "/api/status", headers: []string{"Authorization", ""}},
		{method: "GET", url: "/api/me", path: "/api/me"},
		{method: "GET", url: "/api/me?permissions=%7B%22kernels%22%3A%5B%22read%22%2C%22fly%22%5D%7D", path: "/api/me"},
		{method: "GET", url: "/api/me?permissions=%5B%5D", path: "/api/me"},
		{method: "GET", url: "/api/nbconvert", path: "/api/nbconvert"},
		{method: "GET", url: "/api/spec.yaml", path: "/api/spec.yaml"},
		{method: "GET", url: "/metrics", path: "/metrics"},
		{method: "GET", url: "/api/kernelspecs", path: "/api/kernelspecs"},
		{method: "GET", url: "/api/kernelspecs/Python3", path: "/api/kernelspecs/{kernel_name}"},
		{method: "GET", url: "/api/kernelspecs/nope", path: "/api/kernelspecs/{kernel_name}"},
		{method: "GET", url: "/kernelspecs/python3/logo-64x64.png", path: "/kernelspecs/{kernel_name}/{resource}"},

		{method: "POST", url: "/api/contents", path: "/api/contents", body: map[string]any{"type": "directory"}},
		{method: "PUT", url: "/api/contents/n.ipynb", path: "/api/contents/{path}", body: notebook},
		{method: "PUT", url: "/api/contents/n.ipynb", path: "/api/contents/{path}", body: notebook},
		{method: "PUT", url: "/api/contents/t.txt", path: "/api/contents/{path}", body: map[string]any{"type": "file", "format": "text", "content": "hi"}},
		{method: "PUT", url: "/api/contents/bad.ipynb", path: "/api/contents/{path}", body: "{not json"},
		{method: "GET", url: "/api/contents", path: "/api/contents"},
		{method: "GET", url: "/nbconvert/html/n.ipynb?download=true", path: "/nbconvert/{format}/{path}"},
		{method: "GET", url: "/nbconvert/pdf/n.ipynb", path: "/nbconvert/{format}/{path}"},
		{method: "GET", url: "/nbconvert/html/t.txt", path: "/nbconvert/{format}/{path}"},
		{method: "POST", url: "/nbconvert/script", path: "/nbconvert/{format}", body: map[string]any{"content": notebook["content"]}},
		{method: "POST", url: "/nbconvert/html", path: "/nbconvert/{format}", body: map[string]any{"content": map[string]any{"nbformat": 3}}},
		{method: "GET", url: "/api/contents?type=bogus", path: "/api/contents"},
		{method: "GET", url: "/api/contents/n.ipynb", path: "/api/contents/{path}"},
		{method: "GET", url: "/api/contents/t.txt?hash=1", path: "/api/contents/{path}"},
		{method: "GET", url: "/api/contents/t.txt?content=0", path: "/api/contents/{path}"},
		{method: "GET", url: "/api/contents/missing.txt", path: "/api/contents/{path}"},
		{method: "POST", url: "/api/contents/t.txt", path: "/api/contents/{path}"},
		{method: "PATCH", url: "/api/contents/t.txt", path: "/api/contents/{path}", body: map[string]any{"path": "u.txt"}},
		{method: "PATCH", url: "/api/contents/u.txt", path: "/api/contents/{path}", body: map[string]any{"path": "n.ipynb"}},
		{method: "POST", url: "/api/contents/n.ipynb/checkpoints", path: "/api/contents/{path}/checkpoints", after: func(r response) {
			checkpointID, _ = r.json(t)["id"].(string)
		}},
		{method: "GET", url: "/api/contents/n.ipynb/checkpoints", path: "/api/contents/{path}/checkpoints"},
		{method: "GET", url: "/api/contents/n.ipynb/checkpoints/{cp}", path: "/api/contents/{path}/checkpoints/{checkpoint_id}"},
		{method: "POST", url: "/api/contents/n.ipynb/checkpoints/{cp}", path: "/api/contents/{path}/checkpoints/{checkpoint_id}"},
		{method: "DELETE", url: "/api/contents/n.ipynb/checkpoints/{cp}", path: "/api/contents/{path}/checkpoints/{checkpoint_id}"},
		{method: "POST", url: "/api/contents/n.ipynb/trust", path: "/api/contents/{path}/trust"},
		{method: "GET", url: "/api/notebooks/n.ipynb", path: "/api/notebooks/{path}"},
		{method: "GET", url: "/files/n.ipynb", path: "/files/{path}"},
		{method: "DELETE", url: "/api/contents/u.txt", path: "/api/contents/{path}"},
		{method: "DELETE", url: "/api/contents/.hidden", path: "/api/contents/{path}"},

		{method: "GET", url: "/api/kernels", path: "/api/kernels"},
		{method: "POST", url: "/api/kernels", path: "/api/kernels", body: map[string]any{"name": "nope"}},
		{method: "GET", url: "/api/kernels/k1", path: "/api/kernels/{kernel_id}"},
		{method: "GET", url: "/api/kernels/nope", path: "/api/kernels/{kernel_id}"},
		{method: "POST", url: "/api/kernels/k1/interrupt", path: "/api/kernels/{kernel_id}/interrupt"},
		{method: "GET", url: "/api/kernels/k1/channels", path: "/api/kernels/{kernel_id}/channels"},
		{method: "GET", url: "/api/sessions", path: "/api/sessions"},
		{method: "GET", url: "/api/sessions/s1", path: "/api/sessions/{session_id}"},
		{method: "PATCH", url: "/api/sessions/s1", path: "/api/sessions/{session_id}", body: "{"},
		{method: "GET", url: "/api/clusters", path: "/api/clusters"},
		{method: "GET", url: "/api/clusters/c1", path: "/api/clusters/{profile}"},
		{method: "POST", url: "/api/clusters/c1/start?n=1", path: "/api/clusters/{profile}/start"},
		{method: "POST", url: "/api/clusters/c1/start", path: "/api/clusters/{profile}/start"},
		{method: "POST", url: "/api/clusters/c1/stop", path: "/api/clusters/{profile}/stop"},

		{method: "POST", url: "/notebooks", path: "/notebooks", body: notebook["content"], after: func(r response) {
			_ = json.Unmarshal(r.body, &notebookID)
		}},
		{method: "GET", url: "/notebooks", path: "/notebooks"},
		{method: "GET", url: "/notebooks/{nb}", path: "/notebooks/{notebook_id}"},
		{method: "GET", url: "/notebooks/{nb}?format=py", path: "/notebooks/{notebook_id}"},
		{method: "PUT", url: "/notebooks/{nb}", path: "/notebooks/{notebook_id}", body: notebook["content"]},
		{method: "GET", url: "/kernels", path: "/kernels"},
		{method: "GET", url: "/kernels/k1", path: "/kernels/{kernel_id}"},
		{method: "GET", url: "/clusters", path: "/clusters"},
		{method: "GET", url: "/clusters/c1", path: "/clusters/{profile}"},
		{method: "DELETE", url: "/notebooks/{nb}", path: "/notebooks/{notebook_id}"},
	} {
		url := strings.NewReplacer("{cp}", checkpointID, "{nb}", notebookID).Replace(step.url)
		r := s.do(step.method, url, step.body, step.headers...)
		schemas.check(step.method, step.path, r)
		if step.after != nil {
			step.after(r)
		}
	}
}
