package v1alpha1

import "k8s.io/apimachinery/pkg/api/resource"

// ParameterType is the JSON type of a launch parameter's value.
// +kubebuilder:validation:Enum=integer;number;string;boolean
type ParameterType string

// The types of launch parameters.
const (
	ParameterInteger ParameterType = "integer"
	ParameterNumber  ParameterType = "number"
	ParameterString  ParameterType = "string"
	ParameterBoolean ParameterType = "boolean"
)

// ParameterResourceSet says which of a container's resources a resource parameter sets.
// +kubebuilder:validation:Enum=RequestsAndLimits;Requests;Limits
type ParameterResourceSet string

// What a resource parameter sets.
const (
	SetRequestsAndLimits ParameterResourceSet = "RequestsAndLimits"
	SetRequests          ParameterResourceSet = "Requests"
	SetLimits            ParameterResourceSet = "Limits"
)

// KernelParameter is a value a start may choose for a kernel of this spec, within bounds, as
// Jupyter's parameterized kernel specs (JEP 87) describe them: "{name}" in argv and in env
// values becomes the value, and a parameter may also set a compute resource of the kernel's
// container or its image. /api/kernelspecs shows the parameters as a JSON schema in the spec's
// metadata.parameters, so front ends can offer a form; a start that names none gets the
// defaults.
// +kubebuilder:validation:XValidation:rule="!has(self.resource) || self.type == 'integer' || self.type == 'number'",message="a resource parameter is an integer or a number"
// +kubebuilder:validation:XValidation:rule="!has(self.resource) || (has(self.minimum) && has(self.maximum))",message="a resource parameter needs a minimum and a maximum"
// +kubebuilder:validation:XValidation:rule="self.name != 'connection_file'",message="{connection_file} is the agent's"
// +kubebuilder:validation:XValidation:rule="!has(self.image) || !self.image || (self.type == 'string' && has(self.enum))",message="an image parameter is a string with an enum of the images allowed"
// +kubebuilder:validation:XValidation:rule="!(has(self.image) && self.image && has(self.resource))",message="a parameter sets an image or a resource, not both"
// +kubebuilder:validation:XValidation:rule="(!has(self.minimum) && !has(self.maximum)) || self.type == 'integer' || self.type == 'number'",message="minimum and maximum bound integers and numbers"
// +kubebuilder:validation:XValidation:rule="!has(self.enum) || self.type != 'boolean'",message="a boolean has no enum"
type KernelParameter struct {
	// name is the parameter's name: its key in a start's "parameters", "{name}" in argv and
	// env, and KERNEL_<NAME> (upper case) in the env a Jupyter gateway client sends.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_]*$`
	Name string `json:"name"`

	// title is what a form labels the parameter with.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Title string `json:"title,omitempty"`

	// description says what the parameter does.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// type is the value's JSON type.
	// +required
	Type ParameterType `json:"type"`

	// default is the value of a start that names none, as text ("2", "0.5", "true",
	// "python:3.12"). It must be a value the bounds allow.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	Default string `json:"default"`

	// minimum is the least value of an integer or number, inclusive.
	// +optional
	Minimum *resource.Quantity `json:"minimum,omitempty"`

	// maximum is the greatest value of an integer or number, inclusive.
	// +optional
	Maximum *resource.Quantity `json:"maximum,omitempty"`

	// enum lists the values allowed, as text. A string without an enum may be any text up to
	// 1024 bytes.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=1024
	Enum []string `json:"enum,omitempty"`

	// resource makes the value (with unit appended) the amount of a compute resource of the
	// kernel's container: cpu, memory, nvidia.com/gpu, ...
	// +optional
	Resource *ParameterResource `json:"resource,omitempty"`

	// image makes the value the kernel container's image; the parameter must then list the
	// images allowed in enum.
	// +optional
	Image bool `json:"image,omitempty"`
}

// ParameterResource is the compute resource a parameter sets.
type ParameterResource struct {
	// name is the resource's, e.g. cpu, memory, nvidia.com/gpu.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// unit is appended to the value to make the amount: "" (cpu in cores, GPUs), "m", "Mi",
	// "Gi", ... A memory parameter of unit Gi and value 4 sets 4Gi.
	// +optional
	// +kubebuilder:validation:Enum="";m;k;M;G;T;Ki;Mi;Gi;Ti
	Unit string `json:"unit,omitempty"`

	// set is whether the amount becomes the request, the limit or both. Default both.
	// +optional
	// +kubebuilder:default=RequestsAndLimits
	Set ParameterResourceSet `json:"set,omitempty"`
}
