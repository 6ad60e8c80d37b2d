package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The types in this file describe what dtnflow learns about a path: the fitted
// throughput-vs-streams model, the CPU-vs-throughput regression of each side, and the
// samples both were fitted from. TransferJob status and PathProfile status share them.

// StreamModelName names a throughput-vs-parallel-streams model (Yildirim, Yin & Kosar,
// DADC'09, §3), or Plateau when none of those fits.
// +kubebuilder:validation:Enum=Dinda;Newton;FullSecondOrder;Plateau
type StreamModelName string

const (
	// StreamModelDinda is Th = n/√(a′n² + b′) (Dinda et al.).
	StreamModelDinda StreamModelName = "Dinda"
	// StreamModelNewton is Th = n/√(a′n^c′ + b′), solved by Newton's iteration.
	StreamModelNewton StreamModelName = "Newton"
	// StreamModelFullSecondOrder is Th = n/√(a′n² + b′n + c′).
	StreamModelFullSecondOrder StreamModelName = "FullSecondOrder"
	// StreamModelPlateau is Th = min(n/√b′, 1/√a′): each stream carries 1/√b′ until
	// the path's capacity 1/√a′ is reached (b′ = a′: one stream fills the path). It is
	// fitted when the rate does not rise the way the papers' models need, the usual
	// answer on a clean path.
	StreamModelPlateau StreamModelName = "Plateau"
)

// Decimal is a real number written as a decimal string (Go's strconv 'g' format, for
// example "1.25e-18"). It carries fitted coefficients, which span too many orders of
// magnitude for resource.Quantity and may not be floats in a Kubernetes API.
// +kubebuilder:validation:Pattern=`^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$`
// +kubebuilder:validation:MaxLength=32
type Decimal string

// StreamModel is a fitted throughput-vs-streams curve for one stripe.
type StreamModel struct {
	// name is the model that fitted the samples best (least mean absolute error over
	// every valid 3-point combination: BestCmb, DADC'09 §3.2), or Plateau when none of
	// the papers' models fits them (a curve that does not rise: one stream fills the
	// path).
	// +required
	Name StreamModelName `json:"name"`

	// reason says why this model, for people: the fit error, or the samples that fit
	// no model of the papers.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Reason string `json:"reason,omitempty"`

	// a is the coefficient a′ of the model, with throughput in bits per second.
	// +required
	A Decimal `json:"a"`

	// b is the coefficient b′ of the model.
	// +required
	B Decimal `json:"b"`

	// c is the coefficient c′ of the model; absent for Dinda, which has two coefficients.
	// +optional
	C Decimal `json:"c,omitempty"`

	// optimalStreams is the stream count at which the model peaks, bounded by the
	// samples for a model that rises monotonically, and beyond the largest sample
	// only where the samples still rose at their end and the model fits them within
	// half that rise (at most one doubling beyond; the reason says so).
	// +kubebuilder:validation:Minimum=1
	// +required
	OptimalStreams int32 `json:"optimalStreams"`

	// fitErrorBitsPerSecond is the mean absolute error of the model over the samples.
	// +kubebuilder:validation:Minimum=0
	// +required
	FitErrorBitsPerSecond int64 `json:"fitErrorBitsPerSecond"`

	// peakBitsPerSecond is what one stripe carries as far as the samples show it (the
	// plateau of the curve): the model's rate at optimalStreams, but no more than the
	// best sample unless optimalStreams lies beyond the samples, where the model is
	// trusted (the reason says so).
	// +kubebuilder:validation:Minimum=0
	// +optional
	PeakBitsPerSecond int64 `json:"peakBitsPerSecond,omitempty"`
}

// CPUModel is the linear relation between the CPU an agent uses and the throughput it
// moves (U_cpu = a + b·Th: Yildirim & Kosar, Condor Week 2011; Liu et al., NDM'13 §5.1),
// fitted by least squares for one side of a path.
type CPUModel struct {
	// interceptMillicores is the CPU an agent uses at zero throughput (a).
	// +required
	InterceptMillicores int64 `json:"interceptMillicores"`

	// millicoresPerGbps is the CPU an agent uses per Gbit/s moved (b).
	// +kubebuilder:validation:Minimum=0
	// +required
	MillicoresPerGbps int64 `json:"millicoresPerGbps"`

	// samples is the number of measurements the fit used.
	// +kubebuilder:validation:Minimum=0
	// +required
	Samples int32 `json:"samples"`
}

// ProbeSample is one measurement of a path: a stripe (or several together) with a given
// number of streams and socket buffer size, measured on a stretch of the job's own
// transfer (or, from older agents, memory to memory).
type ProbeSample struct {
	// stripes is how many stripes ran together, each with streams streams; the
	// sample's rate is their aggregate. Absent means one. Samples of several stripes
	// are what justify a plan of several: the planner adds stripes only as far as
	// such a sample showed them paying.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4096
	// +optional
	Stripes int32 `json:"stripes,omitempty"`

	// streams is the number of parallel TCP streams of the stripe.
	// +kubebuilder:validation:Minimum=1
	// +required
	Streams int32 `json:"streams"`

	// bufferBytes is the socket buffer size asked for; 0 means kernel autotuning.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BufferBytes int64 `json:"bufferBytes,omitempty"`

	// bitsPerSecond is the measured throughput of the stripe (of all stripes together
	// when stripes is more than one).
	// +kubebuilder:validation:Minimum=0
	// +required
	BitsPerSecond int64 `json:"bitsPerSecond"`

	// sourceMillicores is the CPU the sending agent used while the sample ran.
	// +kubebuilder:validation:Minimum=0
	// +optional
	SourceMillicores int64 `json:"sourceMillicores,omitempty"`

	// destinationMillicores is the CPU the receiving agent used while the sample ran.
	// +kubebuilder:validation:Minimum=0
	// +optional
	DestinationMillicores int64 `json:"destinationMillicores,omitempty"`

	// windowLimitedPercent is the share of the streams' busy time that a window (the
	// receiver's, or the sender's socket buffer), not the path, held them back while
	// the sample ran, from TCP_INFO; absent means none, or not measured. The planner
	// takes no fewer streams than the first sampled count that was not mostly (50 %)
	// window-limited: fewer measured the buffer, not the path.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	WindowLimitedPercent int32 `json:"windowLimitedPercent,omitempty"`

	// lossPPM is the share of segments retransmitted while the sample ran, in parts
	// per million (from TCP_INFO), which the CPU regression with a loss term uses.
	// +kubebuilder:validation:Minimum=0
	// +optional
	LossPPM int64 `json:"lossPPM,omitempty"`

	// time is when the sample was taken.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}
