package api

import (
	"fmt"
	"strings"
	"testing"
)

// The tables of the site-pairing kinds: TransferPeer and RemoteSite (written by each
// site's admin), RemoteTransfer (written by a peer's manager, its status by this site's).

func validTransferPeer(name string) object {
	return object{
		"apiVersion": "dtnflow.io/v1alpha1", "kind": "TransferPeer", "metadata": object{"name": name},
		"spec": object{
			"namespace":        "peer-site-a",
			"remoteNamespaces": []any{"physics"},
			"grants":           []any{object{"endpoint": "dtn", "access": "Write", "paths": []any{"incoming/site-a"}}},
		},
	}
}

func validRemoteSite(name string) object {
	return object{
		"apiVersion": "dtnflow.io/v1alpha1", "kind": "RemoteSite", "metadata": object{"name": name},
		"spec": object{"kubeconfigSecret": "site-b-kubeconfig", "namespace": "peer-site-a", "namespaceSelector": object{}},
	}
}

func validRemoteTransfer(name string) object {
	return object{
		"apiVersion": "dtnflow.io/v1alpha1", "kind": "RemoteTransfer", "metadata": object{"name": name, "namespace": validationNamespace},
		"spec": object{
			"origin":   object{"namespace": "physics", "name": "calib", "uid": "3f1c"},
			"side":     "Source",
			"endpoint": "dtn",
			"paths":    []any{"runs/0427"},
			"path":     "incoming",
			"stripes":  int64(2), "nodes": []any{"dtn-b1"}, "cpuMillicores": int64(500),
			"directive": `{"generation":1,"mode":"Transfer"}`, "receivers": []any{"10.78.1.11:47000", "10.78.1.11:47001"},
			"secretName": "calib-auth-1a2b3c",
		},
	}
}

// namespaceCases are the rows of a namespace name (a DNS label).
func namespaceCases(field string) []validationCase {
	return []validationCase{
		required(field, nil),
		{name: field + " empty", mutate: func(o object) { set(o, field, "") },
			check: "minLength", field: field, want: "at least 1 chars long"},
		tooLong(field, 63),
		{name: field + " not a DNS label", mutate: func(o object) { set(o, field, "peer.site") },
			check: "pattern", field: field, want: dnsPattern},
	}
}

func transferPeerCreateTable() validationTable {
	grantPath := func(o object, p string) { set(o, "spec.grants[0].paths", []any{p}) }
	return validationTable{
		kind: "TransferPeer",
		op:   opCreate,
		base: func() object { return validTransferPeer("site-a") },
		refused: concat(
			metadataNameCases(),
			[]validationCase{required("spec", nil)},
			namespaceCases("spec.namespace"),
			[]validationCase{
				required("spec.remoteNamespaces", nil),
				{name: "no remote namespace", mutate: func(o object) { set(o, "spec.remoteNamespaces", []any{}) },
					check: "minItems", field: "spec.remoteNamespaces", want: "should have at least 1 items"},
				tooMany("spec.remoteNamespaces", 64, func(i int) any { return fmt.Sprintf("ns-%d", i) }),
				{name: "remote namespace twice", mutate: func(o object) { set(o, "spec.remoteNamespaces", []any{"physics", "physics"}) },
					check: "unique", field: "spec.remoteNamespaces[1]", want: "Duplicate value"},
				tooLong("spec.remoteNamespaces[0]", 63),
				{name: "remote namespace not a DNS label", mutate: func(o object) { set(o, "spec.remoteNamespaces[0]", "a.b") },
					check: "pattern", field: "spec.remoteNamespaces[0]", want: dnsPattern},
				required("spec.grants", nil),
				{name: "no grant", mutate: func(o object) { set(o, "spec.grants", []any{}) },
					check: "minItems", field: "spec.grants", want: "should have at least 1 items"},
				tooMany("spec.grants", 16, func(int) any { return object{"endpoint": "dtn", "access": "Read"} }),
				required("spec.grants[0].access", nil),
				notIn("spec.grants[0].access", "Delete"),
				tooMany("spec.grants[0].paths", 16, func(i int) any { return fmt.Sprintf("p%d", i) }),
			},
			endpointNameCases("spec.grants[0].endpoint"),
			relativePathCases("grant path", grantPath, "spec.grants[0].paths[0]"),
		),
		accepted: []acceptedCase{
			{"every namespace, the whole root, read and write", func(o object) {
				set(o, "spec.remoteNamespaces", []any{"*"})
				set(o, "spec.grants", []any{object{"endpoint": "dtn", "access": "ReadWrite"}})
			}},
			{"16 grants of 16 paths", func(o object) {
				set(o, "spec.grants", listOf(16, func(int) any {
					return object{"endpoint": "dtn", "access": "Read", "paths": listOf(16, func(i int) any { return fmt.Sprintf("p%d", i) })}
				}))
			}},
		},
	}
}

func transferPeerStatusTable() validationTable {
	return validationTable{
		kind: "TransferPeer",
		op:   opUpdateStatus,
		base: func() object {
			o := validTransferPeer("site-a-status")
			o["status"] = object{"conditions": []any{validCondition("Ready")}, "observedGeneration": int64(1),
				"serviceAccount": "dtnflow-peer-site-a", "credentialSecret": "dtnflow-peer-site-a-token"}
			return o
		},
		sentinel: func(o object) { set(o, "status.observedGeneration", int64(2)) },
		refused: concat(
			conditionCases("status.conditions"),
			[]validationCase{tooLong("status.serviceAccount", 253), tooLong("status.credentialSecret", 253)},
		),
	}
}

func remoteSiteCreateTable() validationTable {
	expression := func(o object) {
		set(o, "spec.namespaceSelector", object{"matchExpressions": []any{object{"key": "k", "operator": "Exists"}}})
	}
	return validationTable{
		kind: "RemoteSite",
		op:   opCreate,
		base: func() object { return validRemoteSite("site-b") },
		refused: concat(
			metadataNameCases(),
			[]validationCase{required("spec", nil)},
			endpointNameCases("spec.kubeconfigSecret"),
			namespaceCases("spec.namespace"),
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
			},
		),
	}
}

func remoteSiteStatusTable() validationTable {
	return validationTable{
		kind: "RemoteSite",
		op:   opUpdateStatus,
		base: func() object {
			o := validRemoteSite("site-b-status")
			o["status"] = object{"conditions": []any{validCondition("Connected")}, "observedGeneration": int64(1)}
			return o
		},
		sentinel: func(o object) { set(o, "status.observedGeneration", int64(2)) },
		refused:  conditionCases("status.conditions"),
	}
}

func remoteTransferCreateTable() validationTable {
	srcPath := func(o object, p string) { set(o, "spec.paths", []any{"runs", p}) }
	dstPath := func(o object, p string) { set(o, "spec.path", p) }
	return validationTable{
		kind: "RemoteTransfer",
		op:   opCreate,
		base: func() object { return validRemoteTransfer("physics-calib") },
		refused: concat(
			metadataNameCases(),
			[]validationCase{
				required("spec", nil),
				required("spec.origin", nil),
				required("spec.origin.name", nil),
				{name: "origin name empty", mutate: func(o object) { set(o, "spec.origin.name", "") },
					check: "minLength", field: "spec.origin.name", want: "at least 1 chars long"},
				tooLong("spec.origin.name", 253),
				tooLong("spec.origin.uid", 128),
				required("spec.side", nil),
				notIn("spec.side", "Both"),
				{name: "a source without paths", mutate: func(o object) { del(o, "spec.paths") },
					check: "rule", field: "spec.paths", want: "spec.paths is required when spec.side is Source"},
				tooMany("spec.paths", 1024, func(i int) any { return fmt.Sprintf("p%d", i) }),
				notIn("spec.integrity.checksum", "CRC32"),
				notIn("spec.integrity.inFlight", "Clear"),
				notIn("spec.integrity.verifyMode", "Never"),
				notIn("spec.overwrite", "Sometimes"),
				tooMany("spec.nodes", 64, nodeName),
				tooLong("spec.nodes[0]", 253),
				tooLong("spec.directive", 65536),
				tooMany("spec.receivers", 512, func(int) any { return "10.0.0.1:47000" }),
				tooLong("spec.receivers[0]", 261),
				tooLong("spec.secretName", 253),
			},
			namespaceCases("spec.origin.namespace"),
			endpointNameCases("spec.endpoint"),
			boundCases("spec.stripes", nil, 0, upTo(512)),
			boundCases("spec.cpuMillicores", nil, 0, upTo(1_000_000)),
			relativePathCases("source path", srcPath, "spec.paths[1]"),
			relativePathCases("destination path", dstPath, "spec.path"),
		),
		accepted: []acceptedCase{
			{"a destination side without paths", func(o object) { set(o, "spec.side", "Destination"); del(o, "spec.paths") }},
		},
	}
}

func remoteTransferUpdateTable() validationTable {
	return validationTable{
		kind: "RemoteTransfer",
		op:   opUpdate,
		base: func() object { return validRemoteTransfer("physics-calib-update") },
		refused: []validationCase{
			{name: "side changed", mutate: func(o object) { set(o, "spec.side", "Destination") },
				check: "rule", field: "spec", want: "spec.side, spec.endpoint and spec.origin are immutable"},
			{name: "endpoint changed", mutate: func(o object) { set(o, "spec.endpoint", "other") },
				check: "rule", field: "spec", want: "spec.side, spec.endpoint and spec.origin are immutable"},
			{name: "origin changed", mutate: func(o object) { set(o, "spec.origin.name", "other") },
				check: "rule", field: "spec", want: "spec.side, spec.endpoint and spec.origin are immutable"},
		},
		accepted: []acceptedCase{
			{"stripes, nodes, directive and receivers", func(o object) {
				set(o, "spec.stripes", 4)
				set(o, "spec.directive", `{"generation":2,"mode":"Transfer"}`)
				set(o, "spec.receivers", []any{"a:1", "b:2", "c:3", "d:4"})
			}},
		},
	}
}

func remoteTransferStatusTable() validationTable {
	node := func(i int) any {
		return object{"name": nodeName(i), "nicBitsPerSecond": int64(10_000_000_000), "cpuBudgetMillicores": int64(4000), "maxStripes": 4, "otherStripes": 1}
	}
	stripe := func(i int) any {
		return object{"index": i, "node": "dtn-b1", "address": "10.78.2.11:47000", "state": "Running"}
	}
	const n, s = "status.nodes[0]", "status.stripes[0]"
	return validationTable{
		kind: "RemoteTransfer",
		op:   opUpdateStatus,
		base: func() object {
			o := validRemoteTransfer("physics-calib-status")
			o["status"] = object{"conditions": []any{validCondition("Accepted")}, "observedGeneration": int64(1),
				"nodes": []any{node(0)}, "stripes": []any{stripe(0)}, "report": `{"phase":"Transferring"}`, "agentFailures": 0,
				"queue": object{"position": 2, "reason": "EndpointLimit", "message": "TransferEndpoint dtn-b allows 1 job(s) at once (spec.sharing.maxActiveJobs)",
					"since": "2026-11-25T13:00:00Z"}}
			return o
		},
		sentinel: func(o object) { set(o, "status.agentFailures", 1) },
		refused: concat(
			conditionCases("status.conditions"),
			[]validationCase{
				tooMany("status.nodes", 64, node), duplicate("status.nodes", node),
				required(n+".name", nil), tooLong(n+".name", 253),
				tooMany("status.stripes", 512, stripe), duplicate("status.stripes", stripe),
				required(s+".index", nil), required(s+".state", nil), notIn(s+".state", "Flying"),
				tooLong(s+".node", 253), tooLong(s+".address", 261),
				tooLong("status.report", 262144),
				required("status.queue.position", nil), required("status.queue.reason", nil),
				int32Overflow("status.queue.position", nil),
				notIn("status.queue.reason", "Bored"),
				tooLong("status.queue.message", 1024),
				dateTime("status.queue.since"),
			},
			boundCases("status.queue.position", nil, 1, nil),
			boundCases(n+".nicBitsPerSecond", nil, 0, nil),
			boundCases(n+".cpuBudgetMillicores", nil, 0, nil),
			boundCases(n+".maxStripes", nil, 0, upTo(64)),
			boundCases(n+".otherStripes", nil, 0, upTo(4096)),
			boundCases(s+".index", nil, 0, upTo(511)),
			counter("status.agentFailures", 0),
		),
		accepted: []acceptedCase{
			{"512 stripes", func(o object) { set(o, "status.stripes", listOf(512, stripe)) }},
		},
	}
}

func TestTransferPeerValidation(t *testing.T) {
	t.Run("create", func(t *testing.T) { runValidationTable(t, transferPeerCreateTable()) })
	t.Run("status", func(t *testing.T) { runValidationTable(t, transferPeerStatusTable()) })
}

func TestRemoteSiteValidation(t *testing.T) {
	t.Run("create", func(t *testing.T) { runValidationTable(t, remoteSiteCreateTable()) })
	t.Run("status", func(t *testing.T) { runValidationTable(t, remoteSiteStatusTable()) })
}

func TestRemoteTransferValidation(t *testing.T) {
	ensureNamespace(t, validationNamespace, nil)
	t.Run("create", func(t *testing.T) { runValidationTable(t, remoteTransferCreateTable()) })
	t.Run("update", func(t *testing.T) { runValidationTable(t, remoteTransferUpdateTable()) })
	t.Run("status", func(t *testing.T) { runValidationTable(t, remoteTransferStatusTable()) })
}

var _ = strings.Repeat
