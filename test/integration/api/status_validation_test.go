package api

import (
	"fmt"
	"strings"
)

// The status tables: what the controller writes through the status subresource. The
// controller's Go types cannot hold most of these values, but anyone allowed to write
// status can, and a reader of status (kubectl, dashboards, the next manager) relies on
// the bounds all the same.

const someTime = "2026-01-02T03:04:05Z"

func validCondition(typ string) object {
	return object{"type": typ, "status": "True", "reason": "Observed", "message": "as observed",
		"lastTransitionTime": someTime, "observedGeneration": int64(1)}
}

func validStreamModel() object {
	return object{"name": "Dinda", "reason": "least error", "a": "1.25e-18", "b": "4e-20", "c": "0",
		"optimalStreams": 8, "fitErrorBitsPerSecond": int64(1000), "peakBitsPerSecond": int64(9_000_000_000)}
}

func validCPUModel() object {
	return object{"interceptMillicores": int64(50), "millicoresPerGbps": int64(300), "samples": 5}
}

func validProbeSample() object {
	return object{"stripes": 1, "streams": 4, "bufferBytes": int64(4 << 20), "bitsPerSecond": int64(900_000_000),
		"sourceMillicores": int64(400), "destinationMillicores": int64(500), "lossPPM": int64(10), "windowLimitedPercent": 53, "time": someTime}
}

func dateTime(field string) validationCase {
	return validationCase{name: field + " not a time", mutate: func(o object) { set(o, field, "yesterday") },
		check: "date-time", field: field, want: "date-time"}
}

func tooLong(field string, max int) validationCase {
	return validationCase{name: fmt.Sprintf("%s longer than %d", field, max),
		mutate: func(o object) { set(o, field, strings.Repeat("A", max+1)) },
		check:  "maxLength", field: field, want: fmt.Sprintf("may not be more than %d bytes", max)}
}

func notIn(field, value string) validationCase {
	return validationCase{name: field + " " + value, mutate: func(o object) { set(o, field, value) },
		check: "enum", field: field, want: "Unsupported value"}
}

// failedFile is a valid status.failedFiles item.
func failedFile(i int) any {
	return object{"path": fmt.Sprintf("runs/%03d.dat", i), "error": "read: input/output error"}
}

func tooMany(field string, max int, item func(i int) any) validationCase {
	return validationCase{name: fmt.Sprintf("%s of %d", field, max+1),
		mutate: func(o object) { set(o, field, listOf(max+1, item)) },
		check:  "maxItems", field: field, want: fmt.Sprintf("must have at most %d items", max)}
}

// duplicate is the row of a list keyed by a field (listType=map): two items with one key.
func duplicate(list string, item func(i int) any) validationCase {
	return validationCase{name: list + " with a duplicate key",
		mutate: func(o object) { set(o, list, []any{item(0), item(0)}) },
		check:  "unique", field: list + "[1]", want: "Duplicate value"}
}

// counter is the rows of an int32 field with a minimum and no maximum.
func counter(field string, low int64) []validationCase {
	return append(boundCases(field, nil, low, nil), int32Overflow(field, nil))
}

func conditionCases(list string) []validationCase {
	c := list + "[0]"
	return concat(
		[]validationCase{
			duplicate(list, func(int) any { return validCondition("Ready") }),
			required(c+".type", nil), required(c+".status", nil), required(c+".reason", nil),
			required(c+".message", nil), required(c+".lastTransitionTime", nil),
			tooLong(c+".type", 316),
			{name: c + ".type with a space", mutate: func(o object) { set(o, c+".type", "Not Ready") },
				check: "pattern", field: c + ".type", want: "should match"},
			notIn(c+".status", "Maybe"),
			tooLong(c+".reason", 1024),
			{name: c + ".reason empty", mutate: func(o object) { set(o, c+".reason", "") },
				check: "minLength", field: c + ".reason", want: "at least 1 chars long"},
			{name: c + ".reason not CamelCase", mutate: func(o object) { set(o, c+".reason", "not a reason") },
				check: "pattern", field: c + ".reason", want: "should match"},
			tooLong(c+".message", 32768),
			dateTime(c + ".lastTransitionTime"),
		},
		boundCases(c+".observedGeneration", nil, 0, nil),
	)
}

func streamModelCases(m string) []validationCase {
	return concat(
		[]validationCase{
			required(m+".name", nil), notIn(m+".name", "Linear"),
			tooLong(m+".reason", 512),
			required(m+".a", nil), required(m+".b", nil),
			required(m+".optimalStreams", nil), required(m+".fitErrorBitsPerSecond", nil),
			int32Overflow(m+".optimalStreams", nil),
		},
		decimalCases(m+".a"), decimalCases(m+".b"), decimalCases(m+".c"),
		boundCases(m+".optimalStreams", nil, 1, nil),
		boundCases(m+".fitErrorBitsPerSecond", nil, 0, nil),
		boundCases(m+".peakBitsPerSecond", nil, 0, nil),
	)
}

func decimalCases(field string) []validationCase {
	return []validationCase{
		{name: field + " not a number", mutate: func(o object) { set(o, field, "NaN") },
			check: "pattern", field: field, want: "should match"},
		{name: field + " longer than 32", mutate: func(o object) { set(o, field, "1"+strings.Repeat("0", 32)) },
			check: "maxLength", field: field, want: "may not be more than 32 bytes"},
	}
}

func cpuModelCases(m string) []validationCase {
	return concat(
		[]validationCase{
			required(m+".interceptMillicores", nil), required(m+".millicoresPerGbps", nil), required(m+".samples", nil),
		},
		boundCases(m+".millicoresPerGbps", nil, 0, nil),
		counter(m+".samples", 0),
	)
}

func probeSampleCases(list string) []validationCase {
	s := list + "[0]"
	return concat(
		[]validationCase{
			tooMany(list, 64, func(int) any { return validProbeSample() }),
			required(s+".streams", nil), required(s+".bitsPerSecond", nil),
			dateTime(s + ".time"),
		},
		counter(s+".streams", 1),
		boundCases(s+".stripes", nil, 1, upTo(4096)),
		boundCases(s+".bufferBytes", nil, 0, nil),
		boundCases(s+".bitsPerSecond", nil, 0, nil),
		boundCases(s+".sourceMillicores", nil, 0, nil),
		boundCases(s+".destinationMillicores", nil, 0, nil),
		boundCases(s+".lossPPM", nil, 0, nil),
		boundCases(s+".windowLimitedPercent", nil, 0, upTo(100)),
	)
}

func nodeName(i int) any { return fmt.Sprintf("dtn-%03d", i) }

func transferJobStatusTable() validationTable {
	sizeClass := func(class string) object {
		return object{"class": class, "files": int64(10), "bytes": int64(1 << 30), "maxBytes": int64(1 << 28),
			"pipelining": 1, "parallelism": 4, "concurrency": 2, "channels": 2}
	}
	stripe := func(i int) any {
		return object{"name": fmt.Sprintf("job-s%d", i), "sourceNode": "dtn-a1", "destinationNode": "dtn-b1", "state": "Running", "bitsPerSecond": int64(1)}
	}
	shape := object{"nodes": 1, "stripes": 2, "streamsPerStripe": 4}
	classChannels := func(class string) object {
		return object{"class": class, "channels": 4, "remainingBytes": int64(1 << 30), "bitsPerSecond": int64(400_000_000)}
	}
	channelMove := func(int) any {
		return object{"time": someTime, "from": "Huge", "to": "Small", "channels": 2, "reason": "Huge finished"}
	}
	replan := func(int) any {
		return object{"time": someTime, "reason": "PathHasRoom", "message": "room on the path", "from": deepCopy(shape), "to": deepCopy(shape)}
	}
	status := object{
		"state":              "Transferring",
		"conditions":         []any{validCondition("Planned")},
		"observedGeneration": int64(1),
		"plan": object{
			"sourceNodes": []any{"dtn-a1"}, "destinationNodes": []any{"dtn-b1"},
			"stripesPerNode": 2, "streamsPerStripe": 8, "probeHelperStripes": 1, "bufferBytes": int64(4 << 20),
			"sizeClasses":         []any{sizeClass("Large")},
			"sourceCPUMillicores": int64(500), "destinationCPUMillicores": int64(600), "coordinatorCPUMillicores": int64(20),
			"predictedBitsPerSecond": int64(9_000_000_000), "bindingResource": "Path", "pathBitsPerSecond": int64(9_500_000_000),
			"model": validStreamModel(), "sourceCPU": validCPUModel(), "destinationCPU": validCPUModel(),
			"hash": "5f0c2a9e", "scheduler": "MC",
		},
		"progress": object{
			"bytesDone": int64(1 << 30), "bytesTotal": int64(2 << 30), "filesDone": int64(5), "filesTotal": int64(10),
			"percent": 50, "currentBitsPerSecond": int64(941_000_000), "averageBitsPerSecond": int64(900_000_000),
			"rate": "941 Mbit/s", "etaSeconds": int64(200), "eta": "3m20s", "lastUpdateTime": someTime, "filesSkipped": int64(1), "entriesNotMoved": int64(1),
		},
		"samples":     []any{validProbeSample()},
		"stripes":     []any{stripe(0)},
		"replans":     []any{replan(0)},
		"rateHistory": []any{ratePoint(0)},
		"failedFiles": []any{failedFile(0)}, "skippedFiles": []any{failedFile(1)}, "notMoved": []any{failedFile(2)},
		"run": int64(3), "runTrigger": "Schedule", "lastRunTime": someTime, "nextRunTime": someTime,
		"lastManualTrigger": "2026-03-01", "missedRuns": int64(1), "runs": []any{transferRun(0)},
		"agentFailures": 0,
		"startTime":     someTime,
		"queue":         object{"position": 2, "reason": "PathLimit", "message": "PathProfile a.b allows 1 job(s) at once", "since": someTime},
		"sharing": object{"priority": 2, "jobsOnPath": 3, "pathCapacityBitsPerSecond": int64(990_000_000),
			"shareBitsPerSecond": int64(495_000_000), "boundBy": "Path", "paced": true},
		"timings": object{"firstSeenTime": "2026-11-25T10:00:07.612345Z", "firstByteMilliseconds": int64(1200), "planMilliseconds": int64(4800), "completeMilliseconds": int64(61_000)},
		"channels": object{"scheduler": "ProMC", "moves": int64(3), "classes": []any{classChannels("Small"), classChannels("Huge")},
			"recentMoves": []any{channelMove(0)}},
		"remote": object{"site": "site-b", "side": "Destination", "transfer": "peer-a/physics-job-1a2b3c", "accepted": "True",
			"reason": "Granted", "message": "granted", "nodes": []any{"dtn-b1"}, "agentFailures": 0, "lastSeenTime": someTime},
	}
	const p = "status.plan"
	return validationTable{
		kind: "TransferJob",
		op:   opUpdateStatus,
		base: func() object {
			o := validJob(validationNamespace, "job-status")
			o["status"] = deepCopy(status)
			return o
		},
		sentinel: func(o object) { set(o, "status.agentFailures", 1) },
		refused: concat(
			[]validationCase{
				notIn("status.state", "Running"),
				int32Overflow("status.agentFailures", nil),
				dateTime("status.startTime"),
				dateTime("status.completionTime"),
			},
			conditionCases("status.conditions"),
			[]validationCase{
				tooMany(p+".sourceNodes", 64, nodeName), tooMany(p+".destinationNodes", 64, nodeName),
				{name: "source node name longer than 253", mutate: func(o object) { set(o, p+".sourceNodes", []any{dnsName(254)}) },
					check: "maxLength", field: p + ".sourceNodes[0]", want: "may not be more than 253 bytes"},
				{name: "destination node name longer than 253", mutate: func(o object) { set(o, p+".destinationNodes", []any{dnsName(254)}) },
					check: "maxLength", field: p + ".destinationNodes[0]", want: "may not be more than 253 bytes"},
				required(p+".stripesPerNode", nil), required(p+".streamsPerStripe", nil),
				int32Overflow(p+".stripesPerNode", nil), int32Overflow(p+".streamsPerStripe", nil),
				notIn(p+".bindingResource", "Luck"),
				tooLong(p+".hash", 63),
				{name: "five size classes", mutate: func(o object) {
					set(o, p+".sizeClasses", []any{sizeClass("Small"), sizeClass("Medium"), sizeClass("Large"), sizeClass("Huge"), sizeClass("Tiny")})
				}, check: "maxItems", field: p + ".sizeClasses", want: "must have at most 4 items"},
				duplicate(p+".sizeClasses", func(int) any { return sizeClass("Large") }),
				required(p+".sizeClasses[0].class", nil), notIn(p+".sizeClasses[0].class", "Tiny"),
				required(p+".sizeClasses[0].pipelining", nil), required(p+".sizeClasses[0].parallelism", nil),
				required(p+".sizeClasses[0].concurrency", nil),
			},
			boundCases(p+".stripesPerNode", nil, 1, nil),
			boundCases(p+".streamsPerStripe", nil, 1, nil),
			boundCases(p+".probeHelperStripes", nil, 0, upTo(63)),
			boundCases(p+".bufferBytes", nil, 0, nil),
			boundCases(p+".sourceCPUMillicores", nil, 0, nil),
			boundCases(p+".destinationCPUMillicores", nil, 0, nil),
			boundCases(p+".coordinatorCPUMillicores", nil, 0, nil),
			boundCases(p+".predictedBitsPerSecond", nil, 0, nil),
			boundCases(p+".pathBitsPerSecond", nil, 0, nil),
			boundCases(p+".sizeClasses[0].files", nil, 0, nil),
			boundCases(p+".sizeClasses[0].bytes", nil, 0, nil),
			boundCases(p+".sizeClasses[0].maxBytes", nil, 1, nil),
			counter(p+".sizeClasses[0].pipelining", 1),
			counter(p+".sizeClasses[0].parallelism", 1),
			counter(p+".sizeClasses[0].concurrency", 1),
			counter(p+".sizeClasses[0].channels", 0),
			streamModelCases(p+".model"),
			cpuModelCases(p+".sourceCPU"),
			cpuModelCases(p+".destinationCPU"),
			boundCases("status.progress.percent", nil, 0, upTo(100)),
			[]validationCase{dateTime("status.timings.firstSeenTime")},
			boundCases("status.timings.firstByteMilliseconds", nil, 0, nil),
			boundCases("status.timings.planMilliseconds", nil, 0, nil),
			boundCases("status.timings.completeMilliseconds", nil, 0, nil),
			[]validationCase{
				tooLong("status.progress.rate", 32),
				tooLong("status.progress.eta", 32),
				dateTime("status.progress.lastUpdateTime"),
			},
			probeSampleCases("status.samples"),
			[]validationCase{
				tooMany("status.stripes", 512, stripe),
				duplicate("status.stripes", stripe),
				required("status.stripes[0].name", nil), required("status.stripes[0].state", nil),
				tooLong("status.stripes[0].name", 253),
				tooLong("status.stripes[0].sourceNode", 253),
				tooLong("status.stripes[0].destinationNode", 253),
				notIn("status.stripes[0].state", "Sleeping"),
				tooMany("status.replans", 32, replan),
				required("status.replans[0].time", nil), required("status.replans[0].reason", nil),
				required("status.replans[0].from", nil), required("status.replans[0].to", nil),
				dateTime("status.replans[0].time"),
				tooLong("status.replans[0].reason", 64),
				tooLong("status.replans[0].message", 1024),
				tooMany("status.failedFiles", 20, failedFile),
				required("status.failedFiles[0].path", nil), required("status.failedFiles[0].error", nil),
				tooLong("status.failedFiles[0].path", 1024),
				tooLong("status.failedFiles[0].error", 512),
				tooMany("status.skippedFiles", 20, failedFile),
				required("status.skippedFiles[0].path", nil), required("status.skippedFiles[0].error", nil),
				tooLong("status.skippedFiles[0].path", 1024),
				tooLong("status.skippedFiles[0].error", 512),
				tooMany("status.notMoved", 20, failedFile),
				required("status.notMoved[0].path", nil), required("status.notMoved[0].error", nil),
				tooLong("status.notMoved[0].path", 1024),
				tooLong("status.notMoved[0].error", 512),
			},
			shapeCases("status.replans[0].from"),
			shapeCases("status.replans[0].to"),
			[]validationCase{
				notIn(p+".scheduler", "FIFO"),
				notIn("status.channels.scheduler", "FIFO"),
				{name: "five classes' channels", mutate: func(o object) {
					set(o, "status.channels.classes", []any{classChannels("Small"), classChannels("Medium"), classChannels("Large"), classChannels("Huge"), classChannels("Tiny")})
				}, check: "maxItems", field: "status.channels.classes", want: "must have at most 4 items"},
				duplicate("status.channels.classes", func(int) any { return classChannels("Small") }),
				required("status.channels.classes[0].class", nil), notIn("status.channels.classes[0].class", "Tiny"),
				int32Overflow("status.channels.classes[0].channels", nil),
				tooMany("status.channels.recentMoves", 8, channelMove),
				required("status.channels.recentMoves[0].time", nil), required("status.channels.recentMoves[0].from", nil),
				required("status.channels.recentMoves[0].to", nil), required("status.channels.recentMoves[0].channels", nil),
				dateTime("status.channels.recentMoves[0].time"),
				notIn("status.channels.recentMoves[0].from", "Tiny"), notIn("status.channels.recentMoves[0].to", "Tiny"),
				int32Overflow("status.channels.recentMoves[0].channels", nil),
				tooLong("status.channels.recentMoves[0].reason", 256),
			},
			boundCases("status.channels.moves", nil, 0, nil),
			boundCases("status.channels.classes[0].channels", nil, 0, nil),
			boundCases("status.channels.classes[0].remainingBytes", nil, 0, nil),
			boundCases("status.channels.classes[0].bitsPerSecond", nil, 0, nil),
			boundCases("status.channels.recentMoves[0].channels", nil, 1, nil),
			boundCases(p+".shareBitsPerSecond", nil, 0, nil),
			[]validationCase{
				required("status.queue.position", nil), required("status.queue.reason", nil),
				int32Overflow("status.queue.position", nil),
				notIn("status.queue.reason", "Bored"),
				tooLong("status.queue.message", 1024),
				dateTime("status.queue.since"),
				required("status.sharing.priority", nil),
				notIn("status.sharing.boundBy", "Luck"),
				notIn("status.sharing.fairness", "Polite"),
			},
			boundCases("status.queue.position", nil, 1, nil),
			boundCases("status.sharing.priority", nil, 1, upTo(1000)),
			boundCases("status.sharing.jobsOnPath", nil, 0, upTo(100000)),
			boundCases("status.sharing.pathCapacityBitsPerSecond", nil, 0, nil),
			boundCases("status.sharing.shareBitsPerSecond", nil, 0, nil),
			[]validationCase{
				tooMany("status.rateHistory", 128, ratePoint),
				required("status.rateHistory[0].time", nil),
				dateTime("status.rateHistory[0].time"),
			},
			boundCases("status.rateHistory[0].bitsPerSecond", nil, 0, nil),
			boundCases("status.rateHistory[0].bytesDone", nil, 0, nil),
			boundCases("status.run", nil, 0, nil),
			boundCases("status.missedRuns", nil, 0, nil),
			[]validationCase{
				notIn("status.runTrigger", "Cron"),
				dateTime("status.lastRunTime"),
				dateTime("status.nextRunTime"),
				tooLong("status.lastManualTrigger", 63),
				tooMany("status.runs", 16, transferRun),
				required("status.runs[0].number", nil), required("status.runs[0].trigger", nil),
				required("status.runs[0].startTime", nil), required("status.runs[0].completionTime", nil),
				required("status.runs[0].result", nil),
				notIn("status.runs[0].trigger", "Cron"), notIn("status.runs[0].result", "Partial"),
				dateTime("status.runs[0].startTime"), dateTime("status.runs[0].completionTime"),
				tooLong("status.runs[0].reason", 64), tooLong("status.runs[0].message", 1024),
			},
			boundCases("status.runs[0].number", nil, 1, nil),
			boundCases("status.runs[0].filesDone", nil, 0, nil),
			boundCases("status.runs[0].bytesDone", nil, 0, nil),
			[]validationCase{
				required("status.remote.site", nil), required("status.remote.side", nil),
				tooLong("status.remote.site", 253), notIn("status.remote.side", "Both"),
				tooLong("status.remote.transfer", 317), notIn("status.remote.accepted", "Maybe"),
				tooLong("status.remote.reason", 64), tooLong("status.remote.message", 1024),
				tooMany("status.remote.nodes", 64, nodeName), tooLong("status.remote.nodes[0]", 253),
				dateTime("status.remote.lastSeenTime"),
			},
			counter("status.remote.agentFailures", 0),
		),
		accepted: []acceptedCase{
			{"every list at its longest", func(o object) {
				set(o, p+".sourceNodes", listOf(64, nodeName))
				set(o, p+".destinationNodes", listOf(64, nodeName))
				set(o, p+".sizeClasses", []any{sizeClass("Small"), sizeClass("Medium"), sizeClass("Large"), sizeClass("Huge")})
				set(o, "status.samples", listOf(64, func(int) any { return validProbeSample() }))
				set(o, "status.stripes", listOf(512, stripe))
				set(o, "status.replans", listOf(32, replan))
				set(o, "status.channels.classes", []any{classChannels("Small"), classChannels("Medium"), classChannels("Large"), classChannels("Huge")})
				set(o, "status.channels.recentMoves", listOf(8, channelMove))
				set(o, "status.rateHistory", listOf(128, ratePoint))
				set(o, "status.runs", listOf(16, transferRun))
			}},
			{"progress at 100 percent, complete", func(o object) {
				set(o, "status.progress.percent", 100)
				set(o, "status.state", "Complete")
				set(o, "status.completionTime", someTime)
			}},
		},
	}
}

func shapeCases(shape string) []validationCase {
	return []validationCase{
		int32Overflow(shape+".nodes", nil), int32Overflow(shape+".stripes", nil), int32Overflow(shape+".streamsPerStripe", nil),
	}
}

func transferEndpointStatusTable() validationTable {
	node := func(i int) any {
		return object{"name": nodeName(i), "ready": true, "allocatableCPU": "8", "cpuBudget": "4", "nicBitsPerSecond": int64(10_000_000_000), "stripes": 1}
	}
	status := object{
		"conditions":         []any{validCondition("Ready")},
		"observedGeneration": int64(1),
		"readyNodes":         1,
		"nodes":              []any{node(0)},
		"warmPool":           object{"wanted": 4, "ready": 3, "starting": 1},
	}
	return validationTable{
		kind: "TransferEndpoint",
		op:   opUpdateStatus,
		base: func() object {
			o := validEndpoint("site-status")
			o["status"] = deepCopy(status)
			return o
		},
		sentinel: func(o object) { set(o, "status.readyNodes", 2) },
		refused: concat(
			conditionCases("status.conditions"),
			[]validationCase{
				int32Overflow("status.readyNodes", nil),
				tooMany("status.nodes", 256, node),
				duplicate("status.nodes", node),
				required("status.nodes[0].name", nil), required("status.nodes[0].ready", nil),
				tooLong("status.nodes[0].name", 253),
				{name: "allocatableCPU not a quantity", mutate: func(o object) { set(o, "status.nodes[0].allocatableCPU", "eight") },
					check: "pattern", field: "status.nodes[0].allocatableCPU", want: "should match"},
				{name: "cpuBudget not a quantity", mutate: func(o object) { set(o, "status.nodes[0].cpuBudget", "four") },
					check: "pattern", field: "status.nodes[0].cpuBudget", want: "should match"},
				int32Overflow("status.nodes[0].stripes", nil),
				required("status.warmPool.wanted", nil), required("status.warmPool.ready", nil),
				int32Overflow("status.warmPool.wanted", nil), int32Overflow("status.warmPool.ready", nil),
				int32Overflow("status.warmPool.starting", nil),
			},
			boundCases("status.warmPool.wanted", nil, 0, nil),
			boundCases("status.warmPool.ready", nil, 0, nil),
			boundCases("status.warmPool.starting", nil, 0, nil),
		),
		accepted: []acceptedCase{
			{"256 nodes", func(o object) { set(o, "status.nodes", listOf(256, node)) }},
			{"a warm pool with nothing starting", func(o object) { del(o, "status.warmPool.starting") }},
		},
	}
}

func pathProfileStatusTable() validationTable {
	job := func(i int) any { return fmt.Sprintf("physics/job-%d", i) }
	status := object{
		"model": validStreamModel(), "sourceCPU": validCPUModel(), "destinationCPU": validCPUModel(),
		"bufferBytes": int64(4 << 20), "bestBitsPerSecond": int64(9_000_000_000),
		"samples":          []any{validProbeSample()},
		"lastUpdateTime":   someTime,
		"contributingJobs": []any{job(0)},
		"capacity": object{"plateauBitsPerSecond": int64(990_000_000), "plateauTime": someTime,
			"highestAggregateBitsPerSecond": int64(970_000_000), "highestAggregateJobs": 4, "highestAggregateTime": someTime},
		"expiredJobs": []any{expiredJob(0)},
	}
	const e = "status.expiredJobs[0]"
	empty := func(field string) validationCase {
		return validationCase{name: field + " empty", mutate: func(o object) { set(o, field, "") },
			check: "minLength", field: field, want: "at least 1 chars long"}
	}
	return validationTable{
		kind: "PathProfile",
		op:   opUpdateStatus,
		base: func() object {
			o := validPathProfile("site-a.site-status")
			o["status"] = deepCopy(status)
			return o
		},
		sentinel: func(o object) { set(o, "status.bestBitsPerSecond", int64(9_100_000_000)) },
		refused: concat(
			streamModelCases("status.model"),
			cpuModelCases("status.sourceCPU"),
			cpuModelCases("status.destinationCPU"),
			boundCases("status.bufferBytes", nil, 0, nil),
			boundCases("status.bestBitsPerSecond", nil, 0, nil),
			probeSampleCases("status.samples"),
			[]validationCase{
				dateTime("status.lastUpdateTime"),
				tooMany("status.contributingJobs", 16, job),
				{name: "contributing job longer than namespace/name", mutate: func(o object) {
					set(o, "status.contributingJobs", []any{dnsName(63) + "/" + dnsName(254)})
				}, check: "maxLength", field: "status.contributingJobs[0]", want: "may not be more than 317 bytes"},
				dateTime("status.capacity.plateauTime"),
				dateTime("status.capacity.highestAggregateTime"),
				tooMany("status.expiredJobs", 64, expiredJob),
				required(e+".namespace", nil), required(e+".name", nil), required(e+".specHash", nil), required(e+".completionTime", nil),
				empty(e + ".namespace"), empty(e + ".name"), empty(e + ".specHash"),
				tooLong(e+".namespace", 63), tooLong(e+".name", 253), tooLong(e+".specHash", 64),
				dateTime(e + ".completionTime"),
			},
			boundCases(e+".filesDone", nil, 0, nil),
			boundCases(e+".bytesDone", nil, 0, nil),
			boundCases("status.capacity.plateauBitsPerSecond", nil, 0, nil),
			boundCases("status.capacity.highestAggregateBitsPerSecond", nil, 0, nil),
			boundCases("status.capacity.highestAggregateJobs", nil, 0, upTo(100000)),
		),
		accepted: []acceptedCase{
			{"16 contributing jobs of the longest names", func(o object) {
				set(o, "status.contributingJobs", listOf(16, func(int) any { return dnsName(63) + "/" + dnsName(253) }))
			}},
			{"64 expired jobs of the longest names", func(o object) {
				set(o, "status.expiredJobs", listOf(64, func(i int) any {
					rec := expiredJob(i).(object)
					rec["namespace"], rec["name"] = dnsName(63), dnsName(253)
					return rec
				}))
			}},
		},
	}
}

// expiredJob is a valid PathProfile status.expiredJobs record.
func expiredJob(i int) any {
	return object{"namespace": "physics", "name": fmt.Sprintf("nightly-%d", i), "specHash": strings.Repeat("a", 32),
		"completionTime": someTime, "filesDone": int64(40), "bytesDone": int64(40 << 30)}
}

// ratePoint is a valid TransferJob status.rateHistory point.
func ratePoint(i int) any {
	return object{"time": someTime, "bitsPerSecond": int64(900_000_000 + i), "bytesDone": int64(i) << 30}
}

// transferRun is a valid TransferJob status.runs entry.
func transferRun(i int) any {
	return object{"number": int64(i + 1), "trigger": "Schedule", "startTime": someTime, "completionTime": someTime,
		"result": "Complete", "reason": "Verified", "message": "40 files verified", "filesDone": int64(40), "bytesDone": int64(40 << 30)}
}
