package controllers

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dtnflow/dtnflow/agent/contract"
)

// The coordinator pod carries the conversation between the controller and a job's
// agents: the controller writes the Directive into one annotation, the coordinator
// writes its Report into another (see agent/contract). Watching its own pods, the
// controller wakes on every report without polling any agent, needs no network path to
// the agents, and works the same in envtest, where the tests write the reports.

// reportOf parses the coordinator's report; nil when there is none yet.
func reportOf(pod *corev1.Pod) (*contract.Report, error) {
	if pod == nil {
		return nil, nil
	}
	raw := pod.Annotations[contract.AnnotationReport]
	if raw == "" {
		return nil, nil
	}
	var rep contract.Report
	if err := json.Unmarshal([]byte(raw), &rep); err != nil {
		return nil, fmt.Errorf("annotation %s of pod %s/%s: %w", contract.AnnotationReport, pod.Namespace, pod.Name, err)
	}
	return &rep, nil
}

// directiveOf parses the directive the controller last gave the coordinator; nil when
// there is none (or it is unreadable, which the next directive replaces).
func directiveOf(pod *corev1.Pod) *contract.Directive {
	if pod == nil {
		return nil
	}
	raw := pod.Annotations[contract.AnnotationDirective]
	if raw == "" {
		return nil
	}
	var d contract.Directive
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		return nil
	}
	return &d
}

// encodeDirective writes a directive as the annotation's JSON.
func encodeDirective(d contract.Directive) string {
	b, err := json.Marshal(d)
	if err != nil {
		// A Directive holds only numbers, strings and slices of them.
		panic(fmt.Sprintf("encoding a directive: %v", err))
	}
	return string(b)
}

// sameDirective says whether two directives ask for the same thing, whatever their
// generations.
func sameDirective(a, b *contract.Directive) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.Generation, y.Generation = 0, 0
	return encodeDirective(x) == encodeDirective(y)
}

// leastSampleRTT is the least round trip the report's probe samples saw; 0 without a
// report or a sample that says.
func leastSampleRTT(rep *contract.Report) time.Duration {
	if rep == nil {
		return 0
	}
	return contract.LeastRTT(rep.Samples)
}
