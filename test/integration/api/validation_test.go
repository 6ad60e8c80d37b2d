package api

import (
	"strings"
	"testing"
)

// validationCase is one validation rule: a mutation of a valid object that breaks only
// that rule, and what the API server must say: the field's path and the rule's words.
type validationCase struct {
	name      string
	mutate    func(object)
	wantField string
	wantText  string
}

func runValidationTable(t *testing.T, base func() object, cases []validationCase) {
	t.Helper()
	// The unmutated object must be accepted, or every row would pass for the wrong reason.
	if err := createDryRun(toUnstructured(base())); err != nil {
		t.Fatalf("the valid base object is rejected: %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := base()
			tc.mutate(obj)
			err := createDryRun(toUnstructured(obj))
			if err == nil {
				t.Fatalf("accepted; want rejection naming %q", tc.wantField)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.wantField) {
				t.Errorf("error does not name the field %q:\n%s", tc.wantField, msg)
			}
			if !strings.Contains(msg, tc.wantText) {
				t.Errorf("error does not say %q:\n%s", tc.wantText, msg)
			}
		})
	}
}

func TestTransferJobValidation(t *testing.T) {
	ensureNamespace(t, "validation", nil)
	base := func() object { return validJob("validation", "job") }
	fixed := func(o object) {
		set(o, "spec.tuning.mode", "Fixed")
		set(o, "spec.tuning.fixed", object{"nodes": 1, "stripesPerNode": 2, "streamsPerStripe": 8, "concurrency": 4, "pipelining": 16})
	}
	cases := []validationCase{
		{"absolute source path", func(o object) { set(o, "spec.source.paths", []any{"/etc/passwd"}) },
			"spec.source.paths[0]", "no leading '/'"},
		{"source path with .. segment", func(o object) { set(o, "spec.source.paths", []any{"runs", "runs/../../etc"}) },
			"spec.source.paths[1]", "must not contain a '..' segment"},
		{"source path that is only ..", func(o object) { set(o, "spec.source.paths", []any{".."}) },
			"spec.source.paths[0]", "must not contain a '..' segment"},
		{"empty source path", func(o object) { set(o, "spec.source.paths", []any{""}) },
			"spec.source.paths[0]", "at least 1 chars long"},
		{"no source paths", func(o object) { set(o, "spec.source.paths", []any{}) },
			"spec.source.paths", "should have at least 1 items"},
		{"source paths missing", func(o object) { del(o, "spec.source.paths") },
			"spec.source.paths", "Required value"},
		{"source endpoint missing", func(o object) { del(o, "spec.source.endpoint") },
			"spec.source.endpoint", "Required value"},
		{"source endpoint not a DNS name", func(o object) { set(o, "spec.source.endpoint", "Site_A") },
			"spec.source.endpoint", "should match"},
		{"absolute destination path", func(o object) { set(o, "spec.destination.path", "/incoming") },
			"spec.destination.path", "no leading '/'"},
		{"destination path with .. segment", func(o object) { set(o, "spec.destination.path", "incoming/../..") },
			"spec.destination.path", "must not contain a '..' segment"},
		{"destination missing", func(o object) { del(o, "spec.destination") },
			"spec.destination", "Required value"},
		{"unknown tuning mode", func(o object) { set(o, "spec.tuning.mode", "Magic") },
			"spec.tuning.mode", "Unsupported value"},
		{"Fixed mode without its values", func(o object) { set(o, "spec.tuning.mode", "Fixed") },
			"spec.tuning.fixed", "spec.tuning.fixed is required when spec.tuning.mode is Fixed"},
		{"Fixed values in Auto mode", func(o object) { fixed(o); set(o, "spec.tuning.mode", "Auto") },
			"spec.tuning.fixed", "spec.tuning.fixed may be set only when spec.tuning.mode is Fixed"},
		{"Fixed without nodes", func(o object) { fixed(o); del(o, "spec.tuning.fixed.nodes") },
			"spec.tuning.fixed.nodes", "Required value"},
		{"Fixed without stripesPerNode", func(o object) { fixed(o); del(o, "spec.tuning.fixed.stripesPerNode") },
			"spec.tuning.fixed.stripesPerNode", "Required value"},
		{"Fixed without streamsPerStripe", func(o object) { fixed(o); del(o, "spec.tuning.fixed.streamsPerStripe") },
			"spec.tuning.fixed.streamsPerStripe", "Required value"},
		{"Fixed without concurrency", func(o object) { fixed(o); del(o, "spec.tuning.fixed.concurrency") },
			"spec.tuning.fixed.concurrency", "Required value"},
		{"Fixed without pipelining", func(o object) { fixed(o); del(o, "spec.tuning.fixed.pipelining") },
			"spec.tuning.fixed.pipelining", "Required value"},
		{"Fixed zero streams", func(o object) { fixed(o); set(o, "spec.tuning.fixed.streamsPerStripe", 0) },
			"spec.tuning.fixed.streamsPerStripe", "greater than or equal to 1"},
		{"Fixed too many streams", func(o object) { fixed(o); set(o, "spec.tuning.fixed.streamsPerStripe", 129) },
			"spec.tuning.fixed.streamsPerStripe", "less than or equal to 128"},
		{"Fixed negative buffer", func(o object) { fixed(o); set(o, "spec.tuning.fixed.bufferBytes", -1) },
			"spec.tuning.fixed.bufferBytes", "greater than or equal to 0"},
		{"Fixed nodes above maxNodes", func(o object) {
			fixed(o)
			set(o, "spec.tuning.fixed.nodes", 3)
			set(o, "spec.tuning.limits.maxNodes", 2)
		}, "spec.tuning.fixed.nodes", "must not exceed spec.tuning.limits.maxNodes"},
		{"Fixed stripes above maxStripesPerNode", func(o object) { fixed(o); set(o, "spec.tuning.limits.maxStripesPerNode", 1) },
			"spec.tuning.fixed.stripesPerNode", "must not exceed spec.tuning.limits.maxStripesPerNode"},
		{"Fixed streams above maxStreamsPerStripe", func(o object) { fixed(o); set(o, "spec.tuning.limits.maxStreamsPerStripe", 4) },
			"spec.tuning.fixed.streamsPerStripe", "must not exceed spec.tuning.limits.maxStreamsPerStripe"},
		{"Fixed concurrency above maxConcurrency", func(o object) { fixed(o); set(o, "spec.tuning.limits.maxConcurrency", 2) },
			"spec.tuning.fixed.concurrency", "must not exceed spec.tuning.limits.maxConcurrency"},
		{"maxNodes below 1", func(o object) { set(o, "spec.tuning.limits.maxNodes", 0) },
			"spec.tuning.limits.maxNodes", "greater than or equal to 1"},
		{"maxStripesPerNode below 1", func(o object) { set(o, "spec.tuning.limits.maxStripesPerNode", 0) },
			"spec.tuning.limits.maxStripesPerNode", "greater than or equal to 1"},
		{"maxStreamsPerStripe below 1", func(o object) { set(o, "spec.tuning.limits.maxStreamsPerStripe", 0) },
			"spec.tuning.limits.maxStreamsPerStripe", "greater than or equal to 1"},
		{"maxConcurrency below 1", func(o object) { set(o, "spec.tuning.limits.maxConcurrency", 0) },
			"spec.tuning.limits.maxConcurrency", "greater than or equal to 1"},
		{"maxBitsPerSecond below 1", func(o object) { set(o, "spec.tuning.limits.maxBitsPerSecond", 0) },
			"spec.tuning.limits.maxBitsPerSecond", "greater than or equal to 1"},
		{"floating-point maxBitsPerSecond", func(o object) { set(o, "spec.tuning.limits.maxBitsPerSecond", 1.5) },
			"spec.tuning.limits.maxBitsPerSecond", "must be of type integer"},
		{"unknown checksum", func(o object) { set(o, "spec.integrity.checksum", "CRC32") },
			"spec.integrity.checksum", "Unsupported value"},
		{"unknown overwrite policy", func(o object) { set(o, "spec.overwrite", "Sometimes") },
			"spec.overwrite", "Unsupported value"},
		{"negative backoffLimit", func(o object) { set(o, "spec.backoffLimit", -1) },
			"spec.backoffLimit", "greater than or equal to 0"},
		{"negative ttlSecondsAfterFinished", func(o object) { set(o, "spec.ttlSecondsAfterFinished", -1) },
			"spec.ttlSecondsAfterFinished", "greater than or equal to 0"},
	}
	runValidationTable(t, base, cases)
}

func TestTransferEndpointValidation(t *testing.T) {
	base := func() object { return validEndpoint("site-v") }
	cases := []validationCase{
		{"nodeSelector missing", func(o object) { del(o, "spec.nodeSelector") },
			"spec.nodeSelector", "Required value"},
		{"nodeSelector empty", func(o object) { set(o, "spec.nodeSelector", object{}) },
			"spec.nodeSelector", "should have at least 1 properties"},
		{"storage missing", func(o object) { del(o, "spec.storage") },
			"spec.storage", "Required value"},
		{"relative hostPath", func(o object) { set(o, "spec.storage.hostPath", "srv/dtn") },
			"spec.storage.hostPath", "spec.storage.hostPath must be an absolute path"},
		{"hostPath with .. segment", func(o object) { set(o, "spec.storage.hostPath", "/srv/../etc") },
			"spec.storage.hostPath", "spec.storage.hostPath must not contain a '..' segment"},
		{"nicBitsPerSecond missing", func(o object) { del(o, "spec.nicBitsPerSecond") },
			"spec.nicBitsPerSecond", "Required value"},
		{"nicBitsPerSecond zero", func(o object) { set(o, "spec.nicBitsPerSecond", 0) },
			"spec.nicBitsPerSecond", "greater than or equal to 1"},
		{"diskBitsPerSecond zero", func(o object) { set(o, "spec.diskBitsPerSecond", 0) },
			"spec.diskBitsPerSecond", "greater than or equal to 1"},
		{"cpuBudgetPerNode not a quantity", func(o object) { set(o, "spec.cpuBudgetPerNode", "four cores") },
			"spec.cpuBudgetPerNode", "should match"},
		{"maxStripesPerNode zero", func(o object) { set(o, "spec.maxStripesPerNode", 0) },
			"spec.maxStripesPerNode", "greater than or equal to 1"},
		{"maxStripesPerNode too large", func(o object) { set(o, "spec.maxStripesPerNode", 65) },
			"spec.maxStripesPerNode", "less than or equal to 64"},
		{"namespaceSelector missing", func(o object) { del(o, "spec.namespaceSelector") },
			"spec.namespaceSelector", "Required value"},
		{"agentPorts reversed", func(o object) { set(o, "spec.agentPorts", object{"first": 47100, "last": 47000}) },
			"spec.agentPorts", "spec.agentPorts.first must not be greater than spec.agentPorts.last"},
		{"agentPorts privileged", func(o object) { set(o, "spec.agentPorts", object{"first": 80, "last": 90}) },
			"spec.agentPorts.first", "greater than or equal to 1024"},
		{"externalAddress without port", func(o object) { set(o, "spec.externalAddress", "dtn.example.org") },
			"spec.externalAddress", "should match"},
	}
	runValidationTable(t, base, cases)
}

func TestPathProfileValidation(t *testing.T) {
	base := func() object {
		return object{
			"apiVersion": "dtnflow.io/v1alpha1",
			"kind":       "PathProfile",
			"metadata":   object{"name": "site-a.site-b"},
			"spec":       object{"sourceEndpoint": "site-a", "destinationEndpoint": "site-b"},
		}
	}
	cases := []validationCase{
		{"sourceEndpoint missing", func(o object) { del(o, "spec.sourceEndpoint") },
			"spec.sourceEndpoint", "Required value"},
		{"negative maxAgeSeconds", func(o object) { set(o, "spec.maxAgeSeconds", -5) },
			"spec.maxAgeSeconds", "greater than or equal to 0"},
	}
	runValidationTable(t, base, cases)
}
