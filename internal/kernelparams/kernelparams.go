// Package kernelparams gives kernels the launch parameters of their KernelSpec: it checks the
// values a start asks for against the spec's bounds, applies them to the spec a kernel pod is
// built from ("{name}" in argv and env values, a compute resource, the image), and describes
// them as the JSON schema /api/kernelspecs shows in a spec's metadata.parameters (Jupyter's
// parameterized kernel specs, JEP 87).
package kernelparams

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/domainerr"
)

// maxText is the longest value of a string parameter.
const maxText = 1024

// EnvPrefix is the prefix of the env variables a Jupyter gateway client sends: KERNEL_CPUS
// is parameter cpus.
const EnvPrefix = "KERNEL_"

// reservedName is the placeholder the agent fills in; no parameter may take it.
const reservedName = "connection_file"

// Reason is the short reason of a refused start's error.
const Reason = "bad parameter"

func refuse(format string, args ...any) error {
	return &domainerr.Error{Kind: domainerr.ErrInvalid, Message: fmt.Sprintf(format, args...), Reason: Reason}
}

// Resolve checks the parameters a start gives (JSON values: numbers, booleans, strings; a
// string is read as the parameter's type, as a form or an env variable sends it) against
// spec and returns them as text. A name the spec does not declare, a value of another type or
// out of bounds is refused with an ErrInvalid that says which and why.
func Resolve(spec *nbv1.KernelSpec, given map[string]any) (map[string]string, error) {
	if len(given) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(given))
	for _, name := range slices.Sorted(maps.Keys(given)) {
		p := find(spec, name)
		if p == nil {
			if len(spec.Spec.Parameters) == 0 {
				return nil, refuse("kernel spec %s has no parameters; %q is not one", spec.JupyterName(), name)
			}
			return nil, refuse("kernel spec %s has no parameter %q; it has %s", spec.JupyterName(), name, strings.Join(names(spec), ", "))
		}
		text, err := textOf(p, given[name])
		if err != nil {
			return nil, err
		}
		if text, err = check(p, text); err != nil {
			return nil, err
		}
		out[name] = text
	}
	return out, nil
}

// FromEnv picks the parameters of spec out of a gateway's env: KERNEL_<NAME> for parameter
// name. Other variables are not parameters and are left alone.
func FromEnv(spec *nbv1.KernelSpec, env map[string]string) map[string]any {
	var out map[string]any
	for _, p := range spec.Spec.Parameters {
		if v, ok := env[EnvPrefix+strings.ToUpper(p.Name)]; ok {
			if out == nil {
				out = map[string]any{}
			}
			out[p.Name] = v
		}
	}
	return out
}

// textOf is a JSON value as the parameter's text.
func textOf(p *nbv1.KernelParameter, v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case float64:
		// NaN and infinities come out as text check refuses.
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case bool:
		return strconv.FormatBool(v), nil
	}
	return "", refuse("parameter %s: the value must be a %s", p.Name, p.Type)
}

// check says whether text is a value of p and returns it in canonical form.
func check(p *nbv1.KernelParameter, text string) (string, error) {
	var canonical string
	switch p.Type {
	case nbv1.ParameterInteger:
		n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
		if err != nil {
			return "", refuse("parameter %s: %q is not an integer", p.Name, text)
		}
		canonical = strconv.FormatInt(n, 10)
	case nbv1.ParameterNumber:
		f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return "", refuse("parameter %s: %q is not a number", p.Name, text)
		}
		canonical = strconv.FormatFloat(f, 'f', -1, 64)
	case nbv1.ParameterBoolean:
		b, err := strconv.ParseBool(strings.TrimSpace(text))
		if err != nil {
			return "", refuse("parameter %s: %q is not true or false", p.Name, text)
		}
		canonical = strconv.FormatBool(b)
	case nbv1.ParameterString:
		if len(text) > maxText || !utf8.ValidString(text) || strings.ContainsRune(text, 0) {
			return "", refuse("parameter %s: the value must be UTF-8 text of at most %d bytes", p.Name, maxText)
		}
		canonical = text
	default:
		return "", refuse("parameter %s has no type nbkube knows (%q)", p.Name, p.Type)
	}
	if p.Type == nbv1.ParameterInteger || p.Type == nbv1.ParameterNumber {
		q, err := resource.ParseQuantity(canonical)
		if err != nil {
			return "", refuse("parameter %s: %s is out of range", p.Name, canonical)
		}
		if p.Minimum != nil && q.Cmp(*p.Minimum) < 0 {
			return "", refuse("parameter %s: %s is below the minimum %s", p.Name, canonical, decimal(*p.Minimum))
		}
		if p.Maximum != nil && q.Cmp(*p.Maximum) > 0 {
			return "", refuse("parameter %s: %s is above the maximum %s", p.Name, canonical, decimal(*p.Maximum))
		}
	}
	if len(p.Enum) > 0 && !slices.ContainsFunc(p.Enum, func(e string) bool {
		c, err := canonicalEnum(p, e)
		return err == nil && c == canonical
	}) {
		return "", refuse("parameter %s: %q is not one of %s", p.Name, text, strings.Join(p.Enum, ", "))
	}
	return canonical, nil
}

// canonicalEnum is an enum entry in canonical form (type only, no bounds).
func canonicalEnum(p *nbv1.KernelParameter, e string) (string, error) {
	bare := *p
	bare.Enum, bare.Minimum, bare.Maximum = nil, nil, nil
	return check(&bare, e)
}

// decimal is a quantity as a plain decimal number, as JSON and messages show it.
func decimal(q resource.Quantity) string {
	return strconv.FormatFloat(q.AsApproximateFloat64(), 'f', -1, 64)
}

// Apply returns a copy of spec for a kernel started with values (text, as Resolve returns
// them; a parameter not named takes its default): "{name}" in argv and in env values becomes
// the value, a resource parameter sets its amount, an image parameter the image. Values are
// checked again: a Kernel made with kubectl did not pass through Resolve.
func Apply(spec *nbv1.KernelSpec, values map[string]string) (*nbv1.KernelSpec, error) {
	for name := range values {
		if find(spec, name) == nil {
			return nil, refuse("kernel spec %s has no parameter %q", spec.JupyterName(), name)
		}
	}
	out := spec.DeepCopy()
	if len(spec.Spec.Parameters) == 0 {
		return out, nil
	}
	pairs := make([]string, 0, 2*len(spec.Spec.Parameters))
	for i := range spec.Spec.Parameters {
		p := &spec.Spec.Parameters[i]
		text, given := values[p.Name]
		if !given {
			text = p.Default
		}
		v, err := check(p, text)
		if err != nil {
			return nil, err
		}
		pairs = append(pairs, "{"+p.Name+"}", v)
		if p.Image {
			out.Spec.Image = v
		}
		if r := p.Resource; r != nil {
			if err := setResource(&out.Spec.Resources, p, v); err != nil {
				return nil, err
			}
		}
	}
	// One pass: a value that holds "{other}" stays as it is.
	replace := strings.NewReplacer(pairs...)
	for i, a := range out.Spec.Argv {
		out.Spec.Argv[i] = replace.Replace(a)
	}
	for k, v := range out.Spec.Env {
		out.Spec.Env[k] = replace.Replace(v)
	}
	return out, nil
}

// setResource makes v (with the parameter's unit) the amount of its resource.
func setResource(res *corev1.ResourceRequirements, p *nbv1.KernelParameter, v string) error {
	r := p.Resource
	q, err := resource.ParseQuantity(v + r.Unit)
	if err != nil || q.Sign() < 0 {
		return refuse("parameter %s: %s%s is not an amount of %s", p.Name, v, r.Unit, r.Name)
	}
	name := corev1.ResourceName(r.Name)
	set := func(list *corev1.ResourceList) {
		if *list == nil {
			*list = corev1.ResourceList{}
		}
		(*list)[name] = q
	}
	if r.Set != nbv1.SetLimits {
		set(&res.Requests)
	}
	if r.Set != nbv1.SetRequests {
		set(&res.Limits)
	}
	if req, ok := res.Requests[name]; ok {
		if lim, ok := res.Limits[name]; ok && req.Cmp(lim) > 0 {
			return refuse("parameter %s: a %s request of %s exceeds the kernel spec's limit %s", p.Name, name, req.String(), lim.String())
		}
	}
	return nil
}

// Check lists what is wrong with a spec's parameters, in words for its author: a name the
// agent's placeholder takes, a default or enum entry the bounds refuse, bounds the wrong way
// round, a resource parameter without both bounds.
func Check(spec *nbv1.KernelSpec) []string {
	var problems []string
	for i := range spec.Spec.Parameters {
		p := &spec.Spec.Parameters[i]
		if p.Name == reservedName {
			problems = append(problems, fmt.Sprintf("parameter %s: {%s} is the agent's", p.Name, reservedName))
		}
		if p.Minimum != nil && p.Maximum != nil && p.Minimum.Cmp(*p.Maximum) > 0 {
			problems = append(problems, fmt.Sprintf("parameter %s: minimum %s is above maximum %s", p.Name, decimal(*p.Minimum), decimal(*p.Maximum)))
		}
		if p.Resource != nil && (p.Minimum == nil || p.Maximum == nil) {
			problems = append(problems, fmt.Sprintf("parameter %s sets %s: it needs a minimum and a maximum", p.Name, p.Resource.Name))
		}
		if _, err := check(p, p.Default); err != nil {
			problems = append(problems, "default of "+err.Error())
		}
		for _, e := range p.Enum {
			if _, err := canonicalEnum(p, e); err != nil {
				problems = append(problems, "enum of "+err.Error())
			}
		}
	}
	if len(problems) == 0 {
		// Every parameter's default must make a spec the pod can be built from.
		if _, err := Apply(spec, nil); err != nil {
			problems = append(problems, "with the defaults: "+err.Error())
		}
	}
	return problems
}

// Schema is the JSON schema of spec's parameters, as /api/kernelspecs shows it in the spec's
// metadata.parameters; nil when the spec has none.
func Schema(spec *nbv1.KernelSpec) map[string]any {
	if len(spec.Spec.Parameters) == 0 {
		return nil
	}
	props := make(map[string]any, len(spec.Spec.Parameters))
	for i := range spec.Spec.Parameters {
		p := &spec.Spec.Parameters[i]
		s := map[string]any{"type": string(p.Type)}
		if p.Title != "" {
			s["title"] = p.Title
		}
		if p.Description != "" {
			s["description"] = p.Description
		}
		if v, err := jsonValue(p, p.Default); err == nil {
			s["default"] = v
		}
		if p.Minimum != nil {
			s["minimum"] = json.Number(decimal(*p.Minimum))
		}
		if p.Maximum != nil {
			s["maximum"] = json.Number(decimal(*p.Maximum))
		}
		if len(p.Enum) > 0 {
			enum := make([]any, 0, len(p.Enum))
			for _, e := range p.Enum {
				if v, err := jsonValue(p, e); err == nil {
					enum = append(enum, v)
				}
			}
			s["enum"] = enum
		}
		props[p.Name] = s
	}
	return map[string]any{"type": "object", "properties": props, "additionalProperties": false}
}

// jsonValue is a text value as the JSON value of the parameter's type.
func jsonValue(p *nbv1.KernelParameter, text string) (any, error) {
	c, err := canonicalEnum(p, text)
	if err != nil {
		return nil, err
	}
	switch p.Type {
	case nbv1.ParameterInteger, nbv1.ParameterNumber:
		return json.Number(c), nil
	case nbv1.ParameterBoolean:
		return c == "true", nil
	}
	return c, nil
}

func find(spec *nbv1.KernelSpec, name string) *nbv1.KernelParameter {
	for i := range spec.Spec.Parameters {
		if spec.Spec.Parameters[i].Name == name {
			return &spec.Spec.Parameters[i]
		}
	}
	return nil
}

func names(spec *nbv1.KernelSpec) []string {
	out := make([]string, len(spec.Spec.Parameters))
	for i, p := range spec.Spec.Parameters {
		out[i] = p.Name
	}
	return out
}
