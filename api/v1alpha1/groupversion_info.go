// Package v1alpha1 holds the dtnflow.io/v1alpha1 API: TransferJob (namespaced), and the
// cluster-scoped TransferEndpoint and PathProfile.
//
// No field is a floating-point number: rates are integers whose name carries the unit
// (bitsPerSecond), CPU is a resource.Quantity or integer millicores, and fitted model
// coefficients are decimal strings, because floats do not round-trip through every client
// and the Kubernetes API conventions forbid them.
//
// +kubebuilder:object:generate=true
// +groupName=dtnflow.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "dtnflow.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
