package api

import (
	"fmt"
	"strings"
	"testing"
)

// The spec tables: what users write. refusal_test.go runs them; the status tables are in
// status_validation_test.go.

const (
	validationNamespace = "validation"
	// dnsPattern is what the API server says of a string that breaks a name pattern.
	dnsPattern = "should match"
)

func fixedTuning(o object) {
	set(o, "spec.tuning.mode", "Fixed")
	set(o, "spec.tuning.fixed", object{"nodes": 1, "stripesPerNode": 2, "streamsPerStripe": 8, "concurrency": 4, "pipelining": 16})
}

// boundCases are the rows of an integer field with a minimum and, unless max is nil, a
// maximum: one below, one above.
func boundCases(field string, prepare func(object), low int64, high *int64) []validationCase {
	if prepare == nil {
		prepare = func(object) {}
	}
	rows := []validationCase{{
		name:   field + " below its minimum",
		mutate: func(o object) { prepare(o); set(o, field, low-1) },
		check:  "minimum", field: field, want: fmt.Sprintf("greater than or equal to %d", low),
	}}
	if high != nil {
		rows = append(rows, validationCase{
			name:   field + " above its maximum",
			mutate: func(o object) { prepare(o); set(o, field, *high+1) },
			check:  "maximum", field: field, want: fmt.Sprintf("less than or equal to %d", *high),
		})
	}
	return rows
}

func upTo(n int64) *int64 { return &n }

// rootHostPath is the refusal of a storage root of /.
const rootHostPath = "spec.storage.hostPath must name a directory below /: a storage root of / would give every job the node's whole file system"

// storageOwner gives an endpoint a valid storage owner, for the rows that break it.
func storageOwner(o object) { set(o, "spec.storage.owner", object{"user": 3001, "group": 3001}) }

// int32Overflow is the row of an int32 field without a maximum: a value past 2^31-1,
// which a Go client could not even decode.
func int32Overflow(field string, prepare func(object)) validationCase {
	return validationCase{
		name: field + " past int32",
		mutate: func(o object) {
			if prepare != nil {
				prepare(o)
			}
			set(o, field, int64(1)<<31)
		},
		check: "int32", field: field, want: "format int32",
	}
}

func required(field string, prepare func(object)) validationCase {
	return validationCase{
		name: field + " missing",
		mutate: func(o object) {
			if prepare != nil {
				prepare(o)
			}
			del(o, field)
		},
		check: "required", field: field, want: "Required value",
	}
}

// endpointNameCases are the rows of a field naming a TransferEndpoint (a DNS subdomain).
func endpointNameCases(field string) []validationCase {
	return []validationCase{
		required(field, nil),
		{name: field + " empty", mutate: func(o object) { set(o, field, "") },
			check: "minLength", field: field, want: "at least 1 chars long"},
		{name: field + " longer than a name", mutate: func(o object) { set(o, field, dnsName(254)) },
			check: "maxLength", field: field, want: "may not be more than 253 bytes"},
		{name: field + " not a DNS name", mutate: func(o object) { set(o, field, "Site_A") },
			check: "pattern", field: field, want: dnsPattern},
	}
}

// relativePathCases are the rows of one RelativePath: put places a bad path where the
// path goes, and field is where the API server finds it.
func relativePathCases(what string, put func(o object, path string), field string) []validationCase {
	row := func(name, path, check, want string) validationCase {
		return validationCase{name: what + " " + name, mutate: func(o object) { put(o, path) }, check: check, field: field, want: want}
	}
	return []validationCase{
		row("empty", "", "minLength", "at least 1 chars long"),
		row("longer than 4096 bytes", strings.Repeat("p", 4097), "maxLength", "may not be more than 4096 bytes"),
		row("absolute", "/etc/passwd", "rule", "must be relative to the endpoint's storage root (no leading '/')"),
		row("that is only ..", "..", "rule", "must not contain a '..' segment"),
		row("climbing out with ..", "runs/../../etc", "rule", "must not contain a '..' segment"),
		row("ending in ..", "runs/..", "rule", "must not contain a '..' segment"),
		row("with a NUL", "runs/0427\x00/etc/passwd", "rule", "must not contain a NUL character"),
		row("that is only a NUL", "\x00", "rule", "must not contain a NUL character"),
		row("naming the journals", ".dtnflow", "rule", "must not lie in .dtnflow at the top of the storage root, where receivers keep their journals"),
		row("in the journals", "./.dtnflow/job-1", "rule", "must not lie in .dtnflow at the top of the storage root, where receivers keep their journals"),
	}
}

// siteCases are the rows of a RemoteSite's name on one side of a job.
func siteCases(field string) []validationCase {
	return endpointNameCases(field)[1:] // optional: no "required" row
}

// metadataNameCases are the rows of the object's own name, which the API server checks
// for every kind (a DNS subdomain of at most 253 characters).
func metadataNameCases() []validationCase {
	return []validationCase{
		{name: "name longer than 253", mutate: func(o object) { set(o, "metadata.name", dnsName(254)) },
			field: "metadata.name", want: "must be no more than 253 characters"},
		{name: "name not a DNS subdomain", mutate: func(o object) { set(o, "metadata.name", "Job_1") },
			field: "metadata.name", want: "RFC 1123 subdomain"},
	}
}

func concat(parts ...[]validationCase) []validationCase {
	var out []validationCase
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func transferJobCreateTable() validationTable {
	srcPath := func(o object, p string) { set(o, "spec.source.paths", []any{"runs", p}) }
	dstPath := func(o object, p string) { set(o, "spec.destination.path", p) }
	fixed := fixedTuning
	limits := func(o object) { set(o, "spec.tuning.limits", object{}) }
	return validationTable{
		kind: "TransferJob",
		op:   opCreate,
		base: func() object { return validJob(validationNamespace, "job") },
		refused: concat(
			siteCases("spec.source.site"),
			siteCases("spec.destination.site"),
			[]validationCase{
				{name: "both sides at remote sites", mutate: func(o object) {
					set(o, "spec.source.site", "site-c")
					set(o, "spec.destination.site", "site-d")
				}, check: "rule", field: "spec.destination.site", want: "spec.destination.site: only one side of a job may be at a remote site"},
			},
			metadataNameCases(),
			[]validationCase{
				required("spec", nil),
				required("spec.source", nil),
				required("spec.source.paths", nil),
				{name: "no source paths", mutate: func(o object) { set(o, "spec.source.paths", []any{}) },
					check: "minItems", field: "spec.source.paths", want: "should have at least 1 items"},
				{name: "1025 source paths", mutate: func(o object) {
					set(o, "spec.source.paths", listOf(1025, func(i int) any { return fmt.Sprintf("f%04d", i) }))
				}, check: "maxItems", field: "spec.source.paths", want: "must have at most 1024 items"},
				required("spec.destination", nil),
			},
			endpointNameCases("spec.source.endpoint"),
			endpointNameCases("spec.destination.endpoint"),
			relativePathCases("source path", srcPath, "spec.source.paths[1]"),
			relativePathCases("destination path", dstPath, "spec.destination.path"),
			[]validationCase{
				{name: "unknown tuning mode", mutate: func(o object) { set(o, "spec.tuning.mode", "Magic") },
					check: "enum", field: "spec.tuning.mode", want: "Unsupported value"},
				{name: "Fixed mode without its values", mutate: func(o object) { set(o, "spec.tuning.mode", "Fixed") },
					check: "rule", field: "spec.tuning.fixed", want: "spec.tuning.fixed is required when spec.tuning.mode is Fixed"},
				{name: "Fixed values in Auto mode", mutate: func(o object) { fixed(o); set(o, "spec.tuning.mode", "Auto") },
					check: "rule", field: "spec.tuning.fixed", want: "spec.tuning.fixed may be set only when spec.tuning.mode is Fixed"},
				required("spec.tuning.fixed.nodes", fixed),
				required("spec.tuning.fixed.stripesPerNode", fixed),
				required("spec.tuning.fixed.streamsPerStripe", fixed),
				required("spec.tuning.fixed.concurrency", fixed),
				required("spec.tuning.fixed.pipelining", fixed),
			},
			boundCases("spec.tuning.fixed.nodes", fixed, 1, upTo(64)),
			boundCases("spec.tuning.fixed.stripesPerNode", fixed, 1, upTo(64)),
			boundCases("spec.tuning.fixed.streamsPerStripe", fixed, 1, upTo(128)),
			boundCases("spec.tuning.fixed.bufferBytes", fixed, 0, upTo(1<<30)),
			boundCases("spec.tuning.fixed.concurrency", fixed, 1, upTo(256)),
			boundCases("spec.tuning.fixed.pipelining", fixed, 1, upTo(1024)),
			[]validationCase{
				{name: "Fixed nodes above maxNodes", mutate: func(o object) {
					fixed(o)
					set(o, "spec.tuning.fixed.nodes", 3)
					set(o, "spec.tuning.limits.maxNodes", 2)
				}, check: "rule", field: "spec.tuning.fixed.nodes", want: "spec.tuning.fixed.nodes must not exceed spec.tuning.limits.maxNodes"},
				{name: "Fixed stripes above maxStripesPerNode", mutate: func(o object) { fixed(o); set(o, "spec.tuning.limits.maxStripesPerNode", 1) },
					check: "rule", field: "spec.tuning.fixed.stripesPerNode", want: "spec.tuning.fixed.stripesPerNode must not exceed spec.tuning.limits.maxStripesPerNode"},
				{name: "Fixed streams above maxStreamsPerStripe", mutate: func(o object) { fixed(o); set(o, "spec.tuning.limits.maxStreamsPerStripe", 4) },
					check: "rule", field: "spec.tuning.fixed.streamsPerStripe", want: "spec.tuning.fixed.streamsPerStripe must not exceed spec.tuning.limits.maxStreamsPerStripe"},
				{name: "Fixed concurrency above maxConcurrency", mutate: func(o object) { fixed(o); set(o, "spec.tuning.limits.maxConcurrency", 2) },
					check: "rule", field: "spec.tuning.fixed.concurrency", want: "spec.tuning.fixed.concurrency must not exceed spec.tuning.limits.maxConcurrency"},
			},
			boundCases("spec.tuning.limits.maxNodes", limits, 1, upTo(64)),
			boundCases("spec.tuning.limits.maxStripesPerNode", limits, 1, upTo(64)),
			boundCases("spec.tuning.limits.maxStreamsPerStripe", limits, 1, upTo(128)),
			boundCases("spec.tuning.limits.maxConcurrency", limits, 1, upTo(256)),
			boundCases("spec.tuning.limits.maxBitsPerSecond", limits, 1, nil),
			[]validationCase{
				{name: "floating-point maxBitsPerSecond", mutate: func(o object) { set(o, "spec.tuning.limits.maxBitsPerSecond", 1.5) },
					field: "spec.tuning.limits.maxBitsPerSecond", want: "must be of type integer"},
				{name: "rate as a string", mutate: func(o object) { set(o, "spec.tuning.limits.maxBitsPerSecond", "1G") },
					field: "spec.tuning.limits.maxBitsPerSecond", want: "must be of type integer"},
				{name: "unknown fairness", mutate: func(o object) { set(o, "spec.tuning.fairness", "Polite") },
					check: "enum", field: "spec.tuning.fairness", want: "Unsupported value"},
				{name: "Strict fairness in Fixed mode", mutate: func(o object) { fixed(o); set(o, "spec.tuning.fairness", "Strict") },
					check: "rule", field: "spec.tuning.fairness", want: "spec.tuning.fairness Strict plans the streams itself and cannot be combined with spec.tuning.mode Fixed"},
				{name: "unknown checksum", mutate: func(o object) { set(o, "spec.integrity.checksum", "CRC32") },
					check: "enum", field: "spec.integrity.checksum", want: "Unsupported value"},
				{name: "unknown in-flight check", mutate: func(o object) { set(o, "spec.integrity.inFlight", "None") },
					check: "enum", field: "spec.integrity.inFlight", want: "Unsupported value"},
				{name: "unknown verification mode", mutate: func(o object) { set(o, "spec.integrity.verifyMode", "Eventually") },
					check: "enum", field: "spec.integrity.verifyMode", want: "Unsupported value"},
				{name: "unknown overwrite policy", mutate: func(o object) { set(o, "spec.overwrite", "Sometimes") },
					check: "enum", field: "spec.overwrite", want: "Unsupported value"},
				{name: "unknown source error policy", mutate: func(o object) { set(o, "spec.sourceErrors", "Ignore") },
					check: "enum", field: "spec.sourceErrors", want: "Unsupported value"},
				int32Overflow("spec.ttlSecondsAfterFinished", nil),
			},
			boundCases("spec.backoffLimit", nil, 0, upTo(1000)),
			boundCases("spec.ttlSecondsAfterFinished", nil, 0, nil),
			[]validationCase{
				{name: "priorityClassName longer than a name", mutate: func(o object) { set(o, "spec.priorityClassName", dnsName(254)) },
					check: "maxLength", field: "spec.priorityClassName", want: "may not be more than 253 bytes"},
				{name: "priorityClassName not a DNS name", mutate: func(o object) { set(o, "spec.priorityClassName", "Express_Lane") },
					check: "pattern", field: "spec.priorityClassName", want: dnsPattern},
				{name: "an empty trigger", mutate: func(o object) { set(o, "spec.trigger", object{}) },
					check: "rule", field: "spec.trigger", want: "spec.trigger needs schedule, manual or both"},
				{name: "a trigger with a TTL", mutate: func(o object) {
					set(o, "spec.trigger", object{"schedule": "@daily"})
					set(o, "spec.ttlSecondsAfterFinished", 60)
				}, check: "rule", field: "spec.ttlSecondsAfterFinished", want: "spec.ttlSecondsAfterFinished may not be set with spec.trigger: a recurring job does not finish for good"},
				{name: "an empty schedule", mutate: func(o object) { set(o, "spec.trigger", object{"schedule": "", "manual": "x"}) },
					check: "minLength", field: "spec.trigger.schedule", want: "at least 1 chars long"},
				{name: "a schedule of 129 bytes", mutate: func(o object) { set(o, "spec.trigger.schedule", "0 0 * * *"+strings.Repeat(",1", 60)) },
					check: "maxLength", field: "spec.trigger.schedule", want: "may not be more than 128 bytes"},
				{name: "a schedule of four fields", mutate: func(o object) { set(o, "spec.trigger.schedule", "0 0 * *") },
					check: "pattern", field: "spec.trigger.schedule", want: "should match"},
				{name: "an unknown descriptor", mutate: func(o object) { set(o, "spec.trigger.schedule", "@fortnightly") },
					check: "pattern", field: "spec.trigger.schedule", want: "should match"},
				{name: "a manual trigger of 64 bytes", mutate: func(o object) { set(o, "spec.trigger.manual", strings.Repeat("m", 64)) },
					check: "maxLength", field: "spec.trigger.manual", want: "may not be more than 63 bytes"},
			},
		),
		accepted: []acceptedCase{
			{"name of 253 characters", func(o object) { set(o, "metadata.name", dnsName(253)) }},
			{"endpoint names of 253 characters", func(o object) {
				set(o, "spec.source.endpoint", dnsName(253))
				set(o, "spec.destination.endpoint", dnsName(253))
			}},
			{"1024 source paths", func(o object) {
				set(o, "spec.source.paths", listOf(1024, func(i int) any { return fmt.Sprintf("f%04d", i) }))
			}},
			{"paths of 4096 bytes", func(o object) {
				set(o, "spec.source.paths", []any{strings.Repeat("p", 4096)})
				set(o, "spec.destination.path", strings.Repeat("q", 4096))
			}},
			{"dots that are not a .. segment", func(o object) {
				set(o, "spec.source.paths", []any{"a..b", "..hidden", "runs/.../x", "./runs", "runs/."})
				set(o, "spec.destination.path", "x..")
			}},
			{".dtnflow anywhere but at the top, and names that only begin like it", func(o object) {
				set(o, "spec.source.paths", []any{"runs/.dtnflow", ".dtnflowrc", ".dtnflow-old/x", "x/./.dtnflow"})
				set(o, "spec.destination.path", "incoming/.dtnflow")
			}},
			{"every Fixed figure at its maximum, within limits at theirs", func(o object) {
				set(o, "spec.tuning.mode", "Fixed")
				set(o, "spec.tuning.fixed", object{"nodes": 64, "stripesPerNode": 64, "streamsPerStripe": 128,
					"bufferBytes": int64(1 << 30), "concurrency": 256, "pipelining": 1024})
				set(o, "spec.tuning.limits", object{"maxNodes": 64, "maxStripesPerNode": 64, "maxStreamsPerStripe": 128,
					"maxConcurrency": 256, "maxBitsPerSecond": int64(1) << 62})
			}},
			{"triggers of every form", func(o object) {
				set(o, "spec.trigger", object{"schedule": "CRON_TZ=Europe/Paris 30 2 * * 1-5", "manual": strings.Repeat("m", 63)})
			}},
			{"an @every schedule", func(o object) { set(o, "spec.trigger", object{"schedule": "@every 6h30m"}) }},
			{"a manual trigger alone", func(o object) { set(o, "spec.trigger", object{"manual": "2026-03-01"}) }},
			{"backoffLimit and ttlSecondsAfterFinished at their limits", func(o object) {
				set(o, "spec.backoffLimit", 1000)
				set(o, "spec.ttlSecondsAfterFinished", int64(1)<<31-1)
			}},
			{"priorityClassName of 253 characters", func(o object) { set(o, "spec.priorityClassName", dnsName(253)) }},
		},
	}
}

func transferJobUpdateTable() validationTable {
	return validationTable{
		kind: "TransferJob",
		op:   opUpdate,
		base: func() object { return validJob(validationNamespace, "job-update") },
		refused: []validationCase{
			{name: "source paths changed", mutate: func(o object) { set(o, "spec.source.paths", []any{"elsewhere"}) },
				check: "rule", field: "spec.source", want: "spec.source is immutable"},
			{name: "source endpoint changed", mutate: func(o object) { set(o, "spec.source.endpoint", "site-c") },
				check: "rule", field: "spec.source", want: "spec.source is immutable"},
			{name: "destination endpoint changed", mutate: func(o object) { set(o, "spec.destination.endpoint", "site-c") },
				check: "rule", field: "spec.destination", want: "spec.destination is immutable"},
			{name: "destination path changed", mutate: func(o object) { set(o, "spec.destination.path", "other") },
				check: "rule", field: "spec.destination", want: "spec.destination is immutable"},
			{name: "destination path removed", mutate: func(o object) { del(o, "spec.destination.path") },
				check: "rule", field: "spec.destination", want: "spec.destination is immutable"},
		},
		// What the controller acts on while a job runs may change.
		accepted: []acceptedCase{
			{"tuning limits", func(o object) { set(o, "spec.tuning.limits", object{"maxNodes": 1, "maxBitsPerSecond": 500_000_000}) }},
			{"suspend", func(o object) { set(o, "spec.suspend", true) }},
			{"backoffLimit", func(o object) { set(o, "spec.backoffLimit", 2) }},
			{"ttlSecondsAfterFinished", func(o object) { set(o, "spec.ttlSecondsAfterFinished", 60) }},
			{"overwrite", func(o object) { set(o, "spec.overwrite", "Always") }},
			{"sourceErrors", func(o object) { set(o, "spec.sourceErrors", "Skip") }},
			{"priorityClassName", func(o object) { set(o, "spec.priorityClassName", "express") }},
			{"fairness", func(o object) { set(o, "spec.tuning.fairness", "Strict") }},
		},
	}
}

func transferEndpointCreateTable() validationTable {
	ports := func(o object) { set(o, "spec.agentPorts", object{"first": 47000, "last": 47100}) }
	selector := func(o object) { set(o, "spec.namespaceSelector", object{}) }
	expression := func(o object) {
		set(o, "spec.namespaceSelector", object{"matchExpressions": []any{object{"key": "team", "operator": "In", "values": []any{"physics"}}}})
	}
	warmPool := func(o object) {
		set(o, "spec.agentPods.warmPool", object{"agentsPerNode": 2, "namespaces": []any{"physics"}})
	}
	return validationTable{
		kind: "TransferEndpoint",
		op:   opCreate,
		base: func() object { return validEndpoint("site-v") },
		refused: concat(
			metadataNameCases(),
			[]validationCase{
				required("spec", nil),
				required("spec.nodeSelector", nil),
				{name: "nodeSelector empty", mutate: func(o object) { set(o, "spec.nodeSelector", object{}) },
					check: "minProperties", field: "spec.nodeSelector", want: "should have at least 1 properties"},
				{name: "nodeSelector of 65 labels", mutate: func(o object) {
					set(o, "spec.nodeSelector", mapOf(65, func(i int) (string, any) { return fmt.Sprintf("l%02d", i), "x" }))
				}, check: "maxProperties", field: "spec.nodeSelector", want: "must have at most 64 items"},
				required("spec.storage", nil),
				required("spec.storage.hostPath", nil),
				{name: "hostPath empty", mutate: func(o object) { set(o, "spec.storage.hostPath", "") },
					check: "minLength", field: "spec.storage.hostPath", want: "at least 1 chars long"},
				{name: "hostPath longer than 1024 bytes", mutate: func(o object) { set(o, "spec.storage.hostPath", "/"+strings.Repeat("h", 1024)) },
					check: "maxLength", field: "spec.storage.hostPath", want: "may not be more than 1024 bytes"},
				{name: "relative hostPath", mutate: func(o object) { set(o, "spec.storage.hostPath", "srv/dtn") },
					check: "rule", field: "spec.storage.hostPath", want: "spec.storage.hostPath must be an absolute path"},
				{name: "hostPath with .. segment", mutate: func(o object) { set(o, "spec.storage.hostPath", "/srv/../etc") },
					check: "rule", field: "spec.storage.hostPath", want: "spec.storage.hostPath must not contain a '..' segment"},
				{name: "hostPath ending in ..", mutate: func(o object) { set(o, "spec.storage.hostPath", "/srv/..") },
					check: "rule", field: "spec.storage.hostPath", want: "spec.storage.hostPath must not contain a '..' segment"},
				{name: "hostPath with a NUL", mutate: func(o object) { set(o, "spec.storage.hostPath", "/srv/dtn\x00/etc") },
					check: "rule", field: "spec.storage.hostPath", want: "spec.storage.hostPath must not contain a NUL character"},
				{name: "hostPath /", mutate: func(o object) { set(o, "spec.storage.hostPath", "/") },
					check: "rule", field: "spec.storage.hostPath", want: rootHostPath},
				{name: "hostPath / written otherwise", mutate: func(o object) { set(o, "spec.storage.hostPath", "//./") },
					check: "rule", field: "spec.storage.hostPath", want: rootHostPath},
				required("spec.nicBitsPerSecond", nil),
				required("spec.storage.owner.user", storageOwner),
				required("spec.storage.owner.group", storageOwner),
			},
			boundCases("spec.storage.owner.user", storageOwner, 1, upTo(2147483647)),
			boundCases("spec.storage.owner.group", storageOwner, 1, upTo(2147483647)),
			boundCases("spec.nicBitsPerSecond", nil, 1, nil),
			boundCases("spec.diskBitsPerSecond", nil, 1, nil),
			[]validationCase{
				{name: "cpuBudgetPerNode not a quantity", mutate: func(o object) { set(o, "spec.cpuBudgetPerNode", "four cores") },
					check: "pattern", field: "spec.cpuBudgetPerNode", want: "should match"},
			},
			boundCases("spec.maxStripesPerNode", nil, 1, upTo(64)),
			boundCases("spec.sharing.maxActiveJobs", nil, 1, upTo(10000)),
			boundCases("spec.sharing.maxBitsPerSecond", nil, 1, nil),
			[]validationCase{
				required("spec.namespaceSelector", nil),
				{name: "namespaceSelector of 65 matchLabels", mutate: func(o object) {
					set(o, "spec.namespaceSelector", object{"matchLabels": mapOf(65, func(i int) (string, any) { return fmt.Sprintf("l%02d", i), "x" })})
				}, check: "rule", field: "spec.namespaceSelector.matchLabels", want: "spec.namespaceSelector.matchLabels must have at most 64 entries"},
				{name: "namespaceSelector of 17 matchExpressions", mutate: func(o object) {
					set(o, "spec.namespaceSelector", object{"matchExpressions": listOf(17, func(i int) any {
						return object{"key": fmt.Sprintf("l%02d", i), "operator": "Exists"}
					})})
				}, check: "rule", field: "spec.namespaceSelector.matchExpressions", want: "spec.namespaceSelector.matchExpressions must have at most 16 items"},
				required("spec.namespaceSelector.matchExpressions[0].key", expression),
				required("spec.namespaceSelector.matchExpressions[0].operator", expression),
				required("spec.agentPorts.first", ports),
				required("spec.agentPorts.last", ports),
				{name: "first port below 1024", mutate: func(o object) { ports(o); set(o, "spec.agentPorts.first", 1023) },
					check: "minimum", field: "spec.agentPorts.first", want: "greater than or equal to 1024"},
				{name: "first port above 65535", mutate: func(o object) { ports(o); set(o, "spec.agentPorts.first", 65536) },
					check: "maximum", field: "spec.agentPorts.first", want: "less than or equal to 65535", alsoNamed: "spec.agentPorts"},
				{name: "last port below 1024", mutate: func(o object) { ports(o); set(o, "spec.agentPorts.last", 1023) },
					check: "minimum", field: "spec.agentPorts.last", want: "greater than or equal to 1024", alsoNamed: "spec.agentPorts"},
				{name: "last port above 65535", mutate: func(o object) { ports(o); set(o, "spec.agentPorts.last", 65536) },
					check: "maximum", field: "spec.agentPorts.last", want: "less than or equal to 65535"},
				{name: "agentPorts reversed", mutate: func(o object) { set(o, "spec.agentPorts", object{"first": 47100, "last": 47000}) },
					check: "rule", field: "spec.agentPorts", want: "spec.agentPorts.first must not be greater than spec.agentPorts.last"},
				{name: "externalAddress without port", mutate: func(o object) { set(o, "spec.externalAddress", "dtn.example.org") },
					check: "pattern", field: "spec.externalAddress", want: "should match"},
				{name: "externalAddress longer than 255", mutate: func(o object) { set(o, "spec.externalAddress", dnsName(250)+":47000") },
					check: "maxLength", field: "spec.externalAddress", want: "may not be more than 255 bytes"},
				{name: "externalAddress port above 65535", mutate: func(o object) { set(o, "spec.externalAddress", "dtn.example.org:99999") },
					check: "rule", field: "spec.externalAddress", want: "spec.externalAddress must end in a port from 1 to 65535"},
				{name: "externalAddress port 0", mutate: func(o object) { set(o, "spec.externalAddress", "[fd00::1]:0") },
					check: "rule", field: "spec.externalAddress", want: "spec.externalAddress must end in a port from 1 to 65535"},
				tooMany("spec.agentPods.tolerations", 16, toleration),
				tooLong("spec.agentPods.priorityClassName", 253),
				{name: "priorityClassName not a DNS name", mutate: func(o object) { set(o, "spec.agentPods.priorityClassName", "High_Priority") },
					check: "pattern", field: "spec.agentPods.priorityClassName", want: "should match"},
				{name: "memoryRequest not a quantity", mutate: func(o object) { set(o, "spec.agentPods.memoryRequest", "lots") },
					check: "pattern", field: "spec.agentPods.memoryRequest", want: "should match"},
				{name: "memoryRequest of 0", mutate: func(o object) { set(o, "spec.agentPods.memoryRequest", "0") },
					check: "rule", field: "spec.agentPods.memoryRequest", want: "spec.agentPods.memoryRequest must be positive"},
				{name: "memoryLimit not a quantity", mutate: func(o object) { set(o, "spec.agentPods.memoryLimit", "1 GB") },
					check: "pattern", field: "spec.agentPods.memoryLimit", want: "should match"},
				{name: "memoryLimit negative", mutate: func(o object) { set(o, "spec.agentPods.memoryLimit", "-1Gi") },
					check: "rule", field: "spec.agentPods.memoryLimit", want: "spec.agentPods.memoryLimit must be positive"},
				{name: "memoryLimit below memoryRequest", mutate: func(o object) {
					set(o, "spec.agentPods", object{"memoryRequest": "2Gi", "memoryLimit": "1Gi"})
				}, check: "rule", field: "spec.agentPods.memoryLimit", want: "spec.agentPods.memoryLimit must be at least memoryRequest"},
			},
			boundCases("spec.agentPods.warmPool.agentsPerNode", warmPool, 1, upTo(8)),
			boundCases("spec.agentPods.warmPool.refillDelaySeconds", warmPool, 0, upTo(600)),
			[]validationCase{
				required("spec.agentPods.warmPool.agentsPerNode", warmPool),
				required("spec.agentPods.warmPool.namespaces", warmPool),
				{name: "warmPool of no namespace", mutate: func(o object) { warmPool(o); set(o, "spec.agentPods.warmPool.namespaces", []any{}) },
					check: "minItems", field: "spec.agentPods.warmPool.namespaces", want: "should have at least 1 items"},
				{name: "warmPool of 17 namespaces", mutate: func(o object) {
					warmPool(o)
					set(o, "spec.agentPods.warmPool.namespaces", listOf(17, func(i int) any { return fmt.Sprintf("ns-%02d", i) }))
				}, check: "maxItems", field: "spec.agentPods.warmPool.namespaces", want: "must have at most 16 items"},
				{name: "warmPool namespace twice", mutate: func(o object) { warmPool(o); set(o, "spec.agentPods.warmPool.namespaces", []any{"physics", "physics"}) },
					check: "unique", field: "spec.agentPods.warmPool.namespaces[1]", want: "Duplicate value"},
				{name: "warmPool namespace longer than 63", mutate: func(o object) { warmPool(o); set(o, "spec.agentPods.warmPool.namespaces[0]", strings.Repeat("a", 64)) },
					check: "maxLength", field: "spec.agentPods.warmPool.namespaces[0]", want: "may not be more than 63 bytes"},
				{name: "warmPool namespace not a DNS label", mutate: func(o object) { warmPool(o); set(o, "spec.agentPods.warmPool.namespaces[0]", "a.b") },
					check: "pattern", field: "spec.agentPods.warmPool.namespaces[0]", want: dnsPattern},
			},
		),
		accepted: []acceptedCase{
			{"name of 253 characters", func(o object) { set(o, "metadata.name", dnsName(253)) }},
			{"warmPool of 8 agents per node in 16 namespaces", func(o object) {
				set(o, "spec.agentPods.warmPool", object{"agentsPerNode": 8, "namespaces": listOf(16, func(i int) any { return fmt.Sprintf("ns-%02d", i) })})
			}},
			{"nodeSelector of 64 labels", func(o object) {
				set(o, "spec.nodeSelector", mapOf(64, func(i int) (string, any) { return fmt.Sprintf("l%02d", i), "x" }))
			}},
			{"namespaceSelector of 64 matchLabels and 16 matchExpressions", func(o object) {
				selector(o)
				set(o, "spec.namespaceSelector.matchLabels", mapOf(64, func(i int) (string, any) { return fmt.Sprintf("l%02d", i), "x" }))
				set(o, "spec.namespaceSelector.matchExpressions", listOf(16, func(i int) any {
					return object{"key": fmt.Sprintf("e%02d", i), "operator": "DoesNotExist"}
				}))
			}},
			{"hostPath of 1024 bytes", func(o object) { set(o, "spec.storage.hostPath", "/"+strings.Repeat("h", 1023)) }},
			{"agentPorts across the whole range", func(o object) { set(o, "spec.agentPorts", object{"first": 1024, "last": 65535}) }},
			{"agentPorts of one port", func(o object) { set(o, "spec.agentPorts", object{"first": 47000, "last": 47000}) }},
			{"externalAddress of 255 characters at port 65535", func(o object) { set(o, "spec.externalAddress", dnsName(249)+":65535") }},
			{"externalAddress of an IPv6 host at port 1", func(o object) { set(o, "spec.externalAddress", "[fd00::1]:1") }},
			{"maxStripesPerNode at 64", func(o object) { set(o, "spec.maxStripesPerNode", 64) }},
			{"agentPods at their bounds", func(o object) {
				set(o, "spec.agentPods", object{"tolerations": listOf(16, toleration), "priorityClassName": dnsName(253),
					"memoryRequest": "1Gi", "memoryLimit": int64(1 << 30)})
			}},
			{"sharing at its limits", func(o object) {
				set(o, "spec.sharing", object{"maxActiveJobs": 10000, "maxBitsPerSecond": int64(1) << 62})
			}},
		},
	}
}

func validPathProfile(name string) object {
	return object{
		"apiVersion": "dtnflow.io/v1alpha1",
		"kind":       "PathProfile",
		"metadata":   object{"name": name},
		"spec":       object{"sourceEndpoint": "site-a", "destinationEndpoint": "site-b"},
	}
}

func pathProfileCreateTable() validationTable {
	return validationTable{
		kind: "PathProfile",
		op:   opCreate,
		base: func() object { return validPathProfile("site-a.site-b") },
		refused: concat(
			metadataNameCases(),
			[]validationCase{required("spec", nil)},
			endpointNameCases("spec.sourceEndpoint"),
			endpointNameCases("spec.destinationEndpoint"),
			boundCases("spec.maxAgeSeconds", nil, 0, nil),
			boundCases("spec.maxActiveJobs", nil, 1, upTo(10000)),
			boundCases("spec.maxBitsPerSecond", nil, 1, nil),
		),
		accepted: []acceptedCase{
			{"name of 253 characters", func(o object) { set(o, "metadata.name", dnsName(253)) }},
			{"endpoint names of 253 characters", func(o object) {
				set(o, "spec.sourceEndpoint", dnsName(253))
				set(o, "spec.destinationEndpoint", dnsName(253))
			}},
		},
	}
}

func pathProfileUpdateTable() validationTable {
	return validationTable{
		kind: "PathProfile",
		op:   opUpdate,
		base: func() object { return validPathProfile("site-a.site-c") },
		refused: []validationCase{
			{name: "sourceEndpoint changed", mutate: func(o object) { set(o, "spec.sourceEndpoint", "site-x") },
				check: "rule", field: "spec.sourceEndpoint", want: "spec.sourceEndpoint is immutable"},
			{name: "destinationEndpoint changed", mutate: func(o object) { set(o, "spec.destinationEndpoint", "site-x") },
				check: "rule", field: "spec.destinationEndpoint", want: "spec.destinationEndpoint is immutable"},
		},
		accepted: []acceptedCase{
			{"maxAgeSeconds", func(o object) { set(o, "spec.maxAgeSeconds", 600) }},
			{"maxActiveJobs and maxBitsPerSecond", func(o object) {
				set(o, "spec.maxActiveJobs", 1)
				set(o, "spec.maxBitsPerSecond", int64(1))
			}},
		},
	}
}

func validPriorityClass(name string) object {
	return object{
		"apiVersion": "dtnflow.io/v1alpha1",
		"kind":       "TransferPriorityClass",
		"metadata":   object{"name": name},
		"spec":       object{"priority": int64(2), "namespaceSelector": object{}},
	}
}

func transferPriorityClassCreateTable() validationTable {
	expression := func(o object) {
		set(o, "spec.namespaceSelector", object{"matchExpressions": []any{object{"key": "tier", "operator": "In", "values": []any{"express"}}}})
	}
	return validationTable{
		kind: "TransferPriorityClass",
		op:   opCreate,
		base: func() object { return validPriorityClass("express-v") },
		refused: concat(
			metadataNameCases(),
			[]validationCase{
				required("spec", nil),
				required("spec.priority", nil),
			},
			boundCases("spec.priority", nil, 1, upTo(1000)),
			[]validationCase{
				required("spec.namespaceSelector", nil),
				{name: "namespaceSelector of 65 matchLabels", mutate: func(o object) {
					set(o, "spec.namespaceSelector", object{"matchLabels": mapOf(65, func(i int) (string, any) { return fmt.Sprintf("l%02d", i), "x" })})
				}, check: "rule", field: "spec.namespaceSelector.matchLabels", want: "spec.namespaceSelector.matchLabels must have at most 64 entries"},
				{name: "namespaceSelector of 17 matchExpressions", mutate: func(o object) {
					set(o, "spec.namespaceSelector", object{"matchExpressions": listOf(17, func(i int) any {
						return object{"key": fmt.Sprintf("l%02d", i), "operator": "Exists"}
					})})
				}, check: "rule", field: "spec.namespaceSelector.matchExpressions", want: "spec.namespaceSelector.matchExpressions must have at most 16 items"},
				required("spec.namespaceSelector.matchExpressions[0].key", expression),
				required("spec.namespaceSelector.matchExpressions[0].operator", expression),
				notIn("spec.preemption", "Always"),
				tooLong("spec.description", 1024),
			},
		),
		accepted: []acceptedCase{
			{"name of 253 characters", func(o object) { set(o, "metadata.name", dnsName(253)) }},
			{"priority 1000 that preempts, with the longest description", func(o object) {
				set(o, "spec.priority", 1000)
				set(o, "spec.preemption", "LowerPriority")
				set(o, "spec.description", strings.Repeat("d", 1024))
			}},
		},
	}
}

func TestTransferPriorityClassValidation(t *testing.T) {
	t.Run("create", func(t *testing.T) { runValidationTable(t, transferPriorityClassCreateTable()) })
}

func TestTransferJobValidation(t *testing.T) {
	ensureNamespace(t, validationNamespace, nil)
	t.Run("create", func(t *testing.T) { runValidationTable(t, transferJobCreateTable()) })
	t.Run("update", func(t *testing.T) { runValidationTable(t, transferJobUpdateTable()) })
	t.Run("status", func(t *testing.T) { runValidationTable(t, transferJobStatusTable()) })
}

func TestTransferEndpointValidation(t *testing.T) {
	t.Run("create", func(t *testing.T) { runValidationTable(t, transferEndpointCreateTable()) })
	t.Run("status", func(t *testing.T) { runValidationTable(t, transferEndpointStatusTable()) })
}

func TestPathProfileValidation(t *testing.T) {
	t.Run("create", func(t *testing.T) { runValidationTable(t, pathProfileCreateTable()) })
	t.Run("update", func(t *testing.T) { runValidationTable(t, pathProfileUpdateTable()) })
	t.Run("status", func(t *testing.T) { runValidationTable(t, pathProfileStatusTable()) })
}

// allTables are every table, for the coverage check.
func allTables() []validationTable {
	return []validationTable{
		transferJobCreateTable(), transferJobUpdateTable(), transferJobStatusTable(),
		transferEndpointCreateTable(), transferEndpointStatusTable(),
		pathProfileCreateTable(), pathProfileUpdateTable(), pathProfileStatusTable(),
		transferPeerCreateTable(), transferPeerStatusTable(), remoteSiteCreateTable(), remoteSiteStatusTable(),
		remoteTransferCreateTable(), remoteTransferUpdateTable(), remoteTransferStatusTable(),
		transferPriorityClassCreateTable(),
	}
}

// toleration is a valid toleration of spec.agentPods.
func toleration(i int) any {
	return object{"key": fmt.Sprintf("dtn.example.org/t%02d", i), "operator": "Exists", "effect": "NoSchedule"}
}
